#include "agent/workers/numa_setup.h"

#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/errno_status.h"
#include "base/status_macros.h"
#include "launch/cpu_topology.h"
#include "launch/sysfs_topology.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// "00000000:18:00.0" (NVML) -> "0000:18:00.0"; function 0, as torch addresses a GPU.
std::optional<std::string> SysfsPciAddress(const std::string& bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  char end = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &end) != 4) {
    return std::nullopt;
  }
  return absl::StrFormat("%04x:%02x:%02x.0", domain, bus, device);
}

// Whether this process may prefer `node` for its memory: a container's seccomp profile may
// forbid set_mempolicy, its cpuset may not allow the node (EINVAL). Tried on a thread of its
// own: the policy is per thread, and the agent's own stays as it is.
absl::Status TryPreferringNode(int node) {
  if (node < 0 || node >= 1024) {  // the kernel's largest MAX_NUMNODES; the mask's size
    return absl::InvalidArgumentError(absl::StrCat("NUMA node ", node, " is out of range"));
  }
  int err = 0;
  std::thread probe([&] {
    constexpr size_t kWordBits = 8 * sizeof(unsigned long);
    unsigned long mask[1024 / kWordBits] = {};
    mask[node / kWordBits] = 1UL << (node % kWordBits);
    if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask, 1025UL) != 0) err = errno;
  });
  probe.join();
  if (err == 0) return absl::OkStatus();
  return ErrnoStatus(absl::StrCat("set_mempolicy(MPOL_PREFERRED, node ", node, ")"), err);
}

absl::Status NoGpuFor(const Config& c, int local_rank, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(
      c.SourceOf("numa-binding"), ": local rank ", local_rank,
      " would be bound near GPU (CUDA device) ", local_rank, ", but ", why,
      "; torchrun fails here too. Start at most one worker per GPU, or drop --numa-binding on "
      "nodes without GPUs"));
}

}  // namespace

std::optional<std::vector<std::string>> CudaPciAddresses(const nlohmann::json& report) {
  if (!report.is_object()) return std::nullopt;
  auto gpus = report.find("gpus");
  if (gpus == report.end() || !gpus->is_array() || gpus->empty()) return std::nullopt;
  std::map<int, std::string> by_ordinal;
  for (const nlohmann::json& g : *gpus) {
    if (!g.is_object()) continue;
    auto ordinal = g.find("cuda_index");
    auto bus_id = g.find("pci_bus_id");
    if (ordinal == g.end() || !ordinal->is_number_integer() || bus_id == g.end() ||
        !bus_id->is_string()) {
      continue;  // a GPU CUDA does not see (CUDA_VISIBLE_DEVICES)
    }
    by_ordinal[ordinal->get<int>()] = bus_id->get<std::string>();
  }
  std::vector<std::string> out;
  for (const auto& [ordinal, bus_id] : by_ordinal) {
    if (ordinal != static_cast<int>(out.size())) break;  // CUDA numbers from 0 without gaps
    out.push_back(bus_id);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

absl::Status ResolveNumaBinding(const std::map<std::string, std::string>& env,
                                const nlohmann::json& probe_report, const Config& c,
                                WorkerPlan* workers) {
  if (!c.numa_binding) return absl::OkStatus();
  std::optional<std::vector<std::string>> gpus = CudaPciAddresses(probe_report);
  if (!gpus) {
    std::string why = c.probe == ProbeMode::kOff
                          ? "--probe off leaves muster no list of GPUs"
                          : "the GPU probe found no GPU (no NVIDIA driver, or none visible)";
    return NoGpuFor(c, 0, why);
  }
  if (workers->nproc > static_cast<int>(gpus->size())) {
    return NoGpuFor(
        c, static_cast<int>(gpus->size()),
        absl::StrCat("CUDA sees ", gpus->size(), " GPU", gpus->size() == 1 ? "" : "s", " for ",
                     workers->nproc, " workers (", c.SourceOf("nproc-per-node"), ")"));
  }
  auto root = env.find(kSysfsRootVariable);
  SysfsTopology topology(root == env.end() ? "/sys" : root->second);
  std::vector<int> gpu_nodes;
  for (const std::string& bus_id : *gpus) {
    std::optional<std::string> address = SysfsPciAddress(bus_id);
    if (!address) {
      return absl::DataLossError(absl::StrCat("the GPU probe reported PCI bus id '", bus_id,
                                              "', which is not domain:bus:device.function"));
    }
    absl::StatusOr<int> node = topology.NumaNodeOfPciDevice(*address);
    if (!node.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(c.SourceOf("numa-binding"), ": cannot find the NUMA node of GPU ",
                       gpu_nodes.size(), " (", *address, "): ", node.status().message()));
    }
    gpu_nodes.push_back(*node);
  }
  std::vector<int> allowed = AffinityCpus();
  const char* mode = NumaBindingModeName(*c.numa_binding);
  for (int local = 0; local < workers->nproc; ++local) {
    absl::StatusOr<NumaPlacement> p =
        PlaceNearGpu(*c.numa_binding, local, gpu_nodes, allowed, topology);
    if (!p.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(c.SourceOf("numa-binding"), " ", mode,
                                                        ": local rank ", local, ": ",
                                                        p.status().message()));
    }
    workers->numa_placements.push_back(*std::move(p));
  }
  workers->numa_memory = true;
  for (const NumaPlacement& p : workers->numa_placements) {
    absl::Status preferred = TryPreferringNode(p.node);
    if (preferred.ok()) continue;
    workers->numa_memory = false;
    spdlog::warn(
        "--numa-binding {}: workers are bound to their CPUs only, with the kernel's default "
        "memory policy (allocate on the node they run on): {} (a container's seccomp profile "
        "or cpuset?)",
        mode, std::string(preferred.message()));
    break;
  }
  for (int local = 0; local < workers->nproc; ++local) {
    const NumaPlacement& p = workers->numa_placements[local];
    spdlog::info("--numa-binding {}: local rank {} near GPU {} ({}, NUMA node {}): CPUs {}{}", mode,
                 local, local, *SysfsPciAddress((*gpus)[local]), p.node, FormatCpuList(p.cpus),
                 workers->numa_memory ? absl::StrCat(", memory preferred on node ", p.node) : "");
  }
  return absl::OkStatus();
}

}  // namespace muster
