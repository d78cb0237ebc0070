// The agent's use of muster-probe (docs/design.md §4.9): run it as a child before the first
// rendezvous, count GPUs for --nproc-per-node gpu|auto, and refuse GPUs held by processes
// that are not ours (--stale-gpu-policy). The probe has its own deadline and runs in its
// own process, so a hung or crashing driver can never take the agent down.
#ifndef MUSTER_AGENT_GPU_PROBE_H_
#define MUSTER_AGENT_GPU_PROBE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/config/config.h"
#include "nlohmann/json.hpp"

namespace muster {

struct GpuHolder {
  int gpu = 0;
  int pid = 0;
  std::string name;
  bool alive = false;
};

struct ProbeResult {
  int exit_code = 0;  // muster-probe's: 0 healthy, 3 no driver, 4 unhealthy, ...
  int gpu_count = 0;
  std::vector<GpuHolder> holders;  // processes on any GPU (none of them are ours yet)
  std::vector<std::string> problems;
  nlohmann::json report;  // the full JSON, for the status file
};

// muster-probe next to this executable, else in PATH; empty when absent.
std::string FindProbeBinary();

absl::StatusOr<ProbeResult> RunProbe(const std::string& binary, const std::string& mode,
                                     absl::Duration timeout,
                                     const std::map<std::string, std::string>& env);

// Runs the probe per config (mode, timeout), applies the GPU count to gpu/auto nproc
// (*nproc: the flags' count, config.nproc_per_node, on entry; WorkerPlan::nproc) and the
// stale-GPU policy. Returns the exit code the agent should stop with (2 for bad
// configuration, 138 for an unhealthy node) or 0 to go on; logs why. Fills *report with
// the probe's report (left null when the probe does not run).
int ApplyProbe(const std::map<std::string, std::string>& env, const Config& config, int* nproc,
               nlohmann::json* report);

// The probe report (RunPlan::probe_report) in one line for the job status:
// "2 x NVIDIA H100 80GB HBM3, driver 580.65.06", "..., unhealthy GPU 3: <why>",
// "no NVIDIA driver", or "" when the probe did not run.
std::string ProbeLine(const nlohmann::json& report);

}  // namespace muster

#endif  // MUSTER_AGENT_GPU_PROBE_H_
