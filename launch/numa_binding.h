// NUMA binding of a GPU's worker, as torchrun's --numa-binding computes it
// (torch/numa/binding.py, torch 2.9 and later): the worker whose local rank is N runs on
// CPUs of the NUMA node of GPU N (CUDA ordinal N), chosen by one of four modes, and
// prefers that node for its memory. Pure functions over a SysfsTopology; thread-safe.
#ifndef MUSTER_LAUNCH_NUMA_BINDING_H_
#define MUSTER_LAUNCH_NUMA_BINDING_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "launch/sysfs_topology.h"

namespace muster {

enum class NumaBindingMode {
  kNode,         // every allowed CPU of the GPU's NUMA node
  kSocket,       // every allowed CPU of the NUMA nodes on the GPU's socket
  kExclusive,    // the GPU's node's physical cores, split evenly among that node's GPUs
  kCoreComplex,  // one last-level-cache group (core complex) of the GPU's node per GPU
};

// torchrun's spellings: node, socket, exclusive, core-complex.
const char* NumaBindingModeName(NumaBindingMode mode);
// InvalidArgument naming the four modes for anything else.
absl::StatusOr<NumaBindingMode> ParseNumaBindingMode(std::string_view text);

struct NumaPlacement {
  int node = 0;           // the GPU's NUMA node: the worker's preferred memory node
  std::vector<int> cpus;  // ascending; never empty
};

// The placement of the worker that uses GPU `gpu` (a CUDA ordinal). `gpu_nodes[i]` is the
// NUMA node of CUDA device i, for every device this agent sees (exclusive and core-complex
// share a node among its GPUs); `allowed` the CPUs the agent may run on (sched_getaffinity),
// outside which nothing is given. FailedPrecondition when the topology leaves the worker no
// CPU (a node whose CPUs are all outside `allowed`, fewer physical cores than GPUs on a
// node in exclusive mode), as torchrun fails then; sysfs read errors pass through.
absl::StatusOr<NumaPlacement> PlaceNearGpu(NumaBindingMode mode, int gpu,
                                           const std::vector<int>& gpu_nodes,
                                           const std::vector<int>& allowed,
                                           const SysfsTopology& topology);

// "0-3,8,10-11": the kernel's cpulist form of ascending CPUs (for messages and logs).
std::string FormatCpuList(const std::vector<int>& cpus);

}  // namespace muster

#endif  // MUSTER_LAUNCH_NUMA_BINDING_H_
