// The checks of the health gate (agent/health/health_gate.h, docs/guides/health-gate.md),
// each answering "" for healthy or one line that says why not, for the job's status, the
// event log and the agent's log. Each has a deadline of its own; children go through
// launch/captured_run.h.
#ifndef MUSTER_AGENT_HEALTH_HEALTH_CHECKS_H_
#define MUSTER_AGENT_HEALTH_HEALTH_CHECKS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/time/time.h"

namespace muster {

// The file system holding `dir` has fewer than `min_free` bytes free for an unprivileged
// writer (statvfs's f_bavail): "only 12 MiB free in /logs/job_x (--health-min-free-space
// 100 MiB)". `min_free` 0: not checked.
std::string CheckFreeSpace(const std::string& dir, uint64_t min_free);

// What the user's --health-check said.
struct CommandVerdict {
  std::string excluded;  // "" when it exited 0
  std::string output;    // its stdout and stderr, the last kMaxHealthOutput bytes
};
inline constexpr size_t kMaxHealthOutput = 4096;

// Runs `command` with /bin/sh -c in the environment `env`, its stdout and stderr captured,
// within `timeout` (then SIGKILLed). Unhealthy when it exits non-zero, is killed, cannot be
// started, or outlives the deadline ("--health-check did not finish within 2s
// (--health-check-timeout)"); the reason ends with the last line it wrote.
CommandVerdict RunHealthCommand(const std::string& command, absl::Duration timeout,
                                const std::map<std::string, std::string>& env);

// muster-probe's inventory between rounds (docs/design.md §4.9), when the probe ran at the
// agent's start and found `expected_gpus` GPUs: unhealthy when the probe fails or reports
// the node unhealthy, finds fewer GPUs, or a process still holds a GPU (this node's workers
// are stopped by then: any holder is stale). "" when `binary` is empty (no probe).
std::string CheckGpus(const std::string& binary, int expected_gpus, absl::Duration timeout,
                      const std::map<std::string, std::string>& env);

}  // namespace muster

#endif  // MUSTER_AGENT_HEALTH_HEALTH_CHECKS_H_
