// The agent's exit codes (DESIGN §4.4, README "Restart policies and exit codes"): the
// root cause travels upward as a process exit code, so every place that decides one names
// it from here instead of writing a literal.
#ifndef MUSTER_BASE_EXIT_CODES_H_
#define MUSTER_BASE_EXIT_CODES_H_

namespace muster::exit_code {

// Every worker of the job exited 0.
inline constexpr int kSuccess = 0;
// The agent's own machinery failed during set-up (an event loop, a directory it could not
// make). Not yet split into permanent and transient causes.
inline constexpr int kAgentFailure = 1;
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

}  // namespace muster::exit_code

#endif  // MUSTER_BASE_EXIT_CODES_H_
