// The agent's exit codes (docs/design.md §4.4, docs/reference/exit-codes.md): the
// root cause travels upward as a process exit code, so every place that decides one names
// it from here instead of writing a literal.
#ifndef MUSTER_BASE_EXIT_CODES_H_
#define MUSTER_BASE_EXIT_CODES_H_

#include "absl/status/status.h"

namespace muster::exit_code {

// Every worker of the job exited 0.
inline constexpr int kSuccess = 0;
// Invalid flags or environment: permanent, the message names the flag or variable.
inline constexpr int kUsage = 2;
// The command exists but cannot be executed (permission, format): permanent.
inline constexpr int kNotExecutable = 126;
// The command was not found: permanent.
inline constexpr int kNotFound = 127;
// A transient agent-level failure (rendezvous timed out, server or too many nodes lost,
// an unhealthy GPU): worth a Pod restart. Also "user-defined" (SIGUSR1) as a worker code.
inline constexpr int kTransient = 138;

// A process killed by signal `sig` reports 128 + sig (130 SIGINT, 137 SIGKILL, 143
// SIGTERM), as shells and torchrun do.
constexpr int ForSignal(int sig) { return 128 + sig; }

// The agent's own failure (set-up, a store for the next round, the rendezvous) as an exit
// code: kUsage when trying again cannot help (a bad flag, a file or directory that is not
// there, a permission, an address that is not this machine's), kTransient when it may
// (resources, a port in use, an unreachable peer, anything unexpected).
int ForStatus(const absl::Status& status);

}  // namespace muster::exit_code

#endif  // MUSTER_BASE_EXIT_CODES_H_
