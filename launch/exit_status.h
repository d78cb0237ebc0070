// ExitStatus: how a worker ended, in the one number the rest of muster talks
// about: its exit code, or 128+N when it was killed by signal N (the shell's
// and Kubernetes' convention, docs/design.md §4.4).
#ifndef MUSTER_LAUNCH_EXIT_STATUS_H_
#define MUSTER_LAUNCH_EXIT_STATUS_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/exit_codes.h"

namespace muster {

struct ExitStatus {
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;     // the killing signal, 0 when the process exited

  // From a waitpid() status word.
  static ExitStatus FromWaitStatus(int wstatus);

  // exit_code, or 128+signal.
  int code() const { return signal != 0 ? exit_code::ForSignal(signal) : exit_code; }
  bool success() const { return signal == 0 && exit_code == 0; }
  // "exit 1" or "signal 9 (SIGKILL)".
  std::string Describe() const;
};

// "SIGKILL" for 9; "SIG<n>" for numbers without a name.
std::string SignalName(int sig);

// Accepts "SIGTERM", "TERM", "sigterm" or "15".
absl::StatusOr<int> ParseSignal(std::string_view text);

}  // namespace muster

#endif  // MUSTER_LAUNCH_EXIT_STATUS_H_
