// Restart policy and exit classification (docs/design.md §4.4, seeds/000): what one
// worker's ExitStatus means for the job. Pure functions; thread-safe.
#ifndef MUSTER_LAUNCH_RESTART_POLICY_H_
#define MUSTER_LAUNCH_RESTART_POLICY_H_

#include <set>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace muster {

enum class RestartPolicy {
  kNever,      // any non-zero exit fails the job
  kOnFailure,  // any non-zero exit restarts the job
  kAlways,     // like OnFailure, and a job whose workers all exited 0 runs again
               // while budget is left (a service-like job); the last attempt's
               // outcome counts
  kExitCode,   // codes in the restartable set restart; other non-zero codes are
               // fatal
};

absl::StatusOr<RestartPolicy> ParseRestartPolicy(std::string_view text);
const char* RestartPolicyName(RestartPolicy policy);

// 130 (SIGINT), 137 (SIGKILL), 143 (SIGTERM), 138 (user-defined "please
// restart").
std::set<int> DefaultRestartableExitCodes();
// "130,137,143,138" -> set; each code must be 1..255, "" is no code, an empty entry is an
// error. The error does not name the flag: the caller knows where the text came from.
absl::StatusOr<std::set<int>> ParseExitCodeList(std::string_view text);
// --fatal-exit-code (docs/reference/exit-codes.md "Telling the scheduler"): a code 1..127 that
// reads as nothing else: not 2 (a usage error), 126/127 (a command not executable / not
// found), nor 128+N (killed by signal N), 138 among them (the transient code schedulers
// requeue).
absl::StatusOr<int> ParseFatalExitCode(std::string_view text);

enum class ExitVerdict {
  kSucceeded,    // this worker is done and fine
  kRestartable,  // restart the job if the budget allows
  kFatal,        // fail the job now
};
const char* ExitVerdictName(ExitVerdict verdict);

// One worker's exit. `code` is ExitStatus::code() (exit code, or 128+signal). A
// worker that exits 0 is kSucceeded under every policy: the job succeeds when
// all of them did.
ExitVerdict ClassifyExit(RestartPolicy policy, const std::set<int>& restartable, int code);

// Whether a job whose workers all succeeded runs again (only Always, budget
// permitting).
inline bool RestartsAfterSuccess(RestartPolicy policy) { return policy == RestartPolicy::kAlways; }

}  // namespace muster

#endif  // MUSTER_LAUNCH_RESTART_POLICY_H_
