#include "launch/numa_binding.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace muster {
namespace {

constexpr struct {
  NumaBindingMode mode;
  const char* name;
} kModes[] = {{NumaBindingMode::kNode, "node"},
              {NumaBindingMode::kSocket, "socket"},
              {NumaBindingMode::kExclusive, "exclusive"},
              {NumaBindingMode::kCoreComplex, "core-complex"}};

// The CPUs of `node` this agent may use, ascending.
absl::StatusOr<std::vector<int>> AllowedCpusOfNode(int node, const std::vector<int>& allowed,
                                                   const SysfsTopology& topology) {
  ASSIGN_OR_RETURN(std::vector<int> all, topology.CpusOfNode(node));
  std::set<int> permitted(allowed.begin(), allowed.end());
  std::vector<int> out;
  for (int cpu : all) {
    if (permitted.count(cpu)) out.push_back(cpu);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status NoCpuOnNode(int gpu, int node, const std::vector<int>& allowed) {
  return absl::FailedPreconditionError(
      absl::StrCat("GPU ", gpu, " is on NUMA node ", node,
                   ", none of whose CPUs this agent may use (it may use ", FormatCpuList(allowed),
                   "); widen the agent's CPU set (taskset, the container's cpuset)"));
}

// The CPUs of the GPUs' node grouped by `key_of` (a representative CPU: the lowest of the
// physical core, or of the cache), in the key's order.
template <typename KeyOf>
absl::StatusOr<std::map<int, std::vector<int>>> GroupCpus(const std::vector<int>& cpus,
                                                          KeyOf key_of) {
  std::map<int, std::vector<int>> groups;
  for (int cpu : cpus) {
    ASSIGN_OR_RETURN(std::vector<int> sharing, key_of(cpu));
    int key = sharing.empty() ? cpu : *std::min_element(sharing.begin(), sharing.end());
    groups[key].push_back(cpu);
  }
  return groups;
}

// GPU `gpu`'s place among the GPUs on its node, and how many there are.
std::pair<int, int> PlaceAmongNodeGpus(int gpu, const std::vector<int>& gpu_nodes) {
  int before = 0, count = 0;
  for (int g = 0; g < static_cast<int>(gpu_nodes.size()); ++g) {
    if (gpu_nodes[g] != gpu_nodes[gpu]) continue;
    if (g < gpu) ++before;
    ++count;
  }
  return {before, count};
}

absl::StatusOr<std::vector<int>> SocketCpus(int node, const std::vector<int>& node_cpus,
                                            const std::vector<int>& allowed,
                                            const SysfsTopology& topology) {
  ASSIGN_OR_RETURN(int socket, topology.SocketOfCpu(node_cpus.front()));
  ASSIGN_OR_RETURN(std::vector<int> nodes, topology.PossibleNodes());
  std::vector<int> cpus;
  for (int other : nodes) {
    ASSIGN_OR_RETURN(std::vector<int> other_cpus, AllowedCpusOfNode(other, allowed, topology));
    // torch asks every node for its lowest allowed CPU; a node with none (memory only, or
    // outside the agent's CPU set) has nothing to add either way.
    if (other_cpus.empty()) continue;
    ASSIGN_OR_RETURN(int other_socket, topology.SocketOfCpu(other_cpus.front()));
    if (other_socket == socket) cpus.insert(cpus.end(), other_cpus.begin(), other_cpus.end());
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

absl::StatusOr<std::vector<int>> ExclusiveCpus(int gpu, int node, const std::vector<int>& node_cpus,
                                               const std::vector<int>& gpu_nodes,
                                               const SysfsTopology& topology) {
  ASSIGN_OR_RETURN(auto cores,
                   GroupCpus(node_cpus, [&](int cpu) { return topology.CoreSiblingsOf(cpu); }));
  auto [place, gpus] = PlaceAmongNodeGpus(gpu, gpu_nodes);
  int n = static_cast<int>(cores.size());
  int each = n / gpus, extra = n % gpus;  // the lowest GPUs get one core more
  if (each < 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "exclusive: NUMA node ", node, " has ", n, " physical core", n == 1 ? "" : "s",
        " this agent may use for its ", gpus, " GPUs; use --numa-binding node, or fewer GPUs"));
  }
  int start = place * each + std::min(place, extra);
  int end = start + each + (place < extra ? 1 : 0);
  std::vector<int> cpus;
  int i = 0;
  for (const auto& [key, core] : cores) {
    if (i >= start && i < end) cpus.insert(cpus.end(), core.begin(), core.end());
    ++i;
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

absl::StatusOr<std::vector<int>> CoreComplexCpus(int gpu, const std::vector<int>& node_cpus,
                                                 const std::vector<int>& gpu_nodes,
                                                 const SysfsTopology& topology) {
  ASSIGN_OR_RETURN(auto caches, GroupCpus(node_cpus, [&](int cpu) {
                     return topology.LastLevelCacheSharersOf(cpu);
                   }));
  // The fullest caches first, then by lowest CPU; GPUs beyond the count share round-robin.
  std::vector<std::pair<int, std::vector<int>>> order(caches.begin(), caches.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  int place = PlaceAmongNodeGpus(gpu, gpu_nodes).first;
  return order[place % order.size()].second;
}

}  // namespace

const char* NumaBindingModeName(NumaBindingMode mode) {
  for (const auto& m : kModes) {
    if (m.mode == mode) return m.name;
  }
  return "?";
}

absl::StatusOr<NumaBindingMode> ParseNumaBindingMode(std::string_view text) {
  for (const auto& m : kModes) {
    if (text == m.name) return m.mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", absl::string_view(text.data(), text.size()),
                   "' is not a binding mode; use node, socket, exclusive or core-complex"));
}

absl::StatusOr<NumaPlacement> PlaceNearGpu(NumaBindingMode mode, int gpu,
                                           const std::vector<int>& gpu_nodes,
                                           const std::vector<int>& allowed,
                                           const SysfsTopology& topology) {
  if (gpu < 0 || gpu >= static_cast<int>(gpu_nodes.size())) {
    return absl::FailedPreconditionError(absl::StrCat("no GPU ", gpu, ": ", gpu_nodes.size(),
                                                      " GPU", gpu_nodes.size() == 1 ? "" : "s",
                                                      " visible"));
  }
  NumaPlacement placement{.node = gpu_nodes[gpu], .cpus = {}};
  ASSIGN_OR_RETURN(std::vector<int> node_cpus,
                   AllowedCpusOfNode(placement.node, allowed, topology));
  if (node_cpus.empty()) return NoCpuOnNode(gpu, placement.node, allowed);
  switch (mode) {
    case NumaBindingMode::kNode:
      placement.cpus = node_cpus;
      return placement;
    case NumaBindingMode::kSocket: {
      ASSIGN_OR_RETURN(placement.cpus, SocketCpus(placement.node, node_cpus, allowed, topology));
      return placement;
    }
    case NumaBindingMode::kExclusive: {
      ASSIGN_OR_RETURN(placement.cpus,
                       ExclusiveCpus(gpu, placement.node, node_cpus, gpu_nodes, topology));
      return placement;
    }
    case NumaBindingMode::kCoreComplex: {
      ASSIGN_OR_RETURN(placement.cpus, CoreComplexCpus(gpu, node_cpus, gpu_nodes, topology));
      return placement;
    }
  }
  return absl::InvalidArgumentError("unknown binding mode");
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<std::string> ranges;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    ranges.push_back(j == i ? absl::StrCat(cpus[i]) : absl::StrCat(cpus[i], "-", cpus[j]));
    i = j + 1;
  }
  return absl::StrJoin(ranges, ",");
}

}  // namespace muster
