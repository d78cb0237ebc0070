// SysfsTopology: the machine's CPU, NUMA and PCI topology as Linux's sysfs describes it,
// read from a root directory ("/sys" on a real machine, a copy in integration tests) or
// from files held in memory (unit tests). Each query reads its files when called (nothing
// is cached); thread-safe.
#ifndef MUSTER_LAUNCH_SYSFS_TOPOLOGY_H_
#define MUSTER_LAUNCH_SYSFS_TOPOLOGY_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace muster {

class SysfsTopology {
 public:
  explicit SysfsTopology(std::string root = "/sys") : root_(std::move(root)) {}
  // A tree in memory: path relative to the root ("devices/system/node/possible") -> text.
  static SysfsTopology InMemory(std::map<std::string, std::string> files);

  // The NUMA node of PCI device `address` ("0000:18:00.0", as in bus/pci/devices/);
  // a kernel without NUMA information writes -1 there, which is node 0 (the one node).
  absl::StatusOr<int> NumaNodeOfPciDevice(const std::string& address) const;
  // The NUMA nodes that may exist (devices/system/node/possible).
  absl::StatusOr<std::vector<int>> PossibleNodes() const;
  // The CPUs of NUMA node `node` (devices/system/node/nodeN/cpulist), online or not.
  absl::StatusOr<std::vector<int>> CpusOfNode(int node) const;
  // The socket (physical package) of `cpu` (cpuN/topology/physical_package_id).
  absl::StatusOr<int> SocketOfCpu(int cpu) const;
  // The hardware threads sharing `cpu`'s physical core (cpuN/topology/thread_siblings_list).
  absl::StatusOr<std::vector<int>> CoreSiblingsOf(int cpu) const;
  // The CPUs sharing `cpu`'s highest-level data or unified cache (cpuN/cache/indexM with the
  // largest `level` whose `type` is Data or Unified: the L3 of a core complex on AMD).
  absl::StatusOr<std::vector<int>> LastLevelCacheSharersOf(int cpu) const;

 private:
  absl::StatusOr<std::string> ReadLine(const std::string& relative) const;
  // The entries of directory `relative` whose names start with `prefix`.
  absl::StatusOr<std::vector<std::string>> List(const std::string& relative,
                                                const std::string& prefix) const;
  absl::StatusOr<int> ReadInt(const std::string& relative) const;
  absl::StatusOr<std::vector<int>> ReadCpuList(const std::string& relative) const;

  std::string root_;
  std::optional<std::map<std::string, std::string>> files_;  // InMemory's
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_SYSFS_TOPOLOGY_H_
