// CPU lists and NUMA topology for --bind-cores-to-rank. Read-only OS queries; thread-safe.
#ifndef MUSTER_LAUNCH_CPU_TOPOLOGY_H_
#define MUSTER_LAUNCH_CPU_TOPOLOGY_H_

#include <map>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace muster {

// "0-3,8,10-11" (the kernel's cpulist format) -> {0,1,2,3,8,10,11}.
absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text);

// The CPUs this process may run on (sched_getaffinity).
std::vector<int> AffinityCpus();

// CPU -> NUMA node from /sys/devices/system/node/node*/cpulist; empty when unreadable
// (containers without sysfs, non-NUMA kernels).
std::map<int, int> NumaNodeOfCpu();

}  // namespace muster

#endif  // MUSTER_LAUNCH_CPU_TOPOLOGY_H_
