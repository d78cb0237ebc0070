// --numa-binding, resolved once before the first rendezvous: which CPUs and NUMA node each
// local rank gets (launch/numa_binding.h), from the GPU probe's report (CUDA device N's PCI
// address) and the machine's sysfs. As torchrun: local rank N uses GPU N, and a node where
// a rank has no GPU is refused rather than left unbound. Thread-compatible.
#ifndef MUSTER_AGENT_NUMA_SETUP_H_
#define MUSTER_AGENT_NUMA_SETUP_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/config/run_plan.h"
#include "nlohmann/json.hpp"

namespace muster {

// Tests only: a directory standing in for /sys (tests/integration/test_numa_binding.py
// builds one holding this machine's CPU topology and the fake GPUs' PCI devices).
inline constexpr char kSysfsRootVariable[] = "MUSTER_TEST_SYSFS_ROOT";

// CUDA device N's PCI address in sysfs form ("0000:18:00.0", as torch derives it from the
// device's PCI domain, bus and device) from a muster-probe report; one entry per device
// CUDA sees, in CUDA order. nullopt where the report lists no GPU.
std::optional<std::vector<std::string>> CudaPciAddresses(const nlohmann::json& probe_report);

// Fills workers->numa_placements (one per each of workers->nproc local ranks) and
// workers->numa_memory when config's --numa-binding is set, from the GPU probe's
// `probe_report`; logs each rank's placement. FailedPrecondition, naming the flag and the
// fix, where a rank has no GPU or the topology leaves it no CPU.
absl::Status ResolveNumaBinding(const std::map<std::string, std::string>& env,
                                const nlohmann::json& probe_report, const Config& config,
                                WorkerPlan* workers);

}  // namespace muster

#endif  // MUSTER_AGENT_NUMA_SETUP_H_
