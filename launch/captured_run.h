// Helper children: short programs the agent runs to their end and reads the output of (the
// GPU probe, py-spy, the look at the workers' Python, agent/workers/worker_torch.h), and the
// probe's own forked children. One shape for all of them: start (exec through launch/spawner.h,
// or a fork that runs a function: nccl_probe/probe_child.h), read the output, wait for the end
// within one deadline, SIGKILL what is left through its pidfd, reap it without blocking past a
// grace, decode the wait status (launch/exit_status.h).
//
// The children are spawned as workers are (launch/spawner.h: own session, PDEATHSIG, only
// fds 0-2 and the output pipe). Reaping goes through ReapChildWithin (launch/reaper.h): it
// consumes no SIGCHLD and takes ECHILD (an event loop's reaper came first) as gone, so these
// functions may run beside the agent's loop. Thread-compatible; call StartHelper from the
// main thread (PDEATHSIG follows the thread that created the child).
#ifndef MUSTER_LAUNCH_CAPTURED_RUN_H_
#define MUSTER_LAUNCH_CAPTURED_RUN_H_

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "launch/exit_status.h"
#include "launch/spawner.h"

namespace muster {

// A started helper: our unreaped child and the read end of its output pipe.
struct HelperChild {
  pid_t pid = -1;
  UniqueFd out;
};

// Which of the child's streams go to the pipe.
enum class HelperOutput { kStdout, kStdoutAndStderr };

// Spawns `spec` with stdout (and stderr) on a fresh pipe, added to `spec.fds`. Errors:
// Spawn's (NotFound, PermissionDenied, ...) or the errno of pipe2.
absl::StatusOr<HelperChild> StartHelper(SpawnSpec spec,
                                        HelperOutput output = HelperOutput::kStdout);

// Forks a child that runs `body` and exits with what it returns; `body` writes its output to
// the fd it is given (the pipe's write end; stdio stays the caller's). The child dies with
// the calling thread (PDEATHSIG SIGKILL) and keeps the caller's fds. Only for a
// single-threaded caller (muster-probe): a forked child of a threaded process may call
// nothing but async-signal-safe functions. Errors: the errno of pipe2 or fork.
absl::StatusOr<HelperChild> ForkHelper(const std::function<int(int out)>& body);

struct AwaitOptions {
  // Past this many bytes the output is not read further (what came is kept).
  size_t max_output = std::numeric_limits<size_t>::max();
  // After the SIGKILL of a child still running at the deadline: how long its reap is
  // waited for (a process stuck in the kernel, or held by a tracer, is left to whoever
  // reaps on SIGCHLD).
  absl::Duration kill_grace = absl::Seconds(2);
};

// How a helper ended.
struct HelperResult {
  std::string out;            // what it wrote, up to max_output bytes
  bool output_ended = false;  // it closed its output (EOF) or reached max_output
  // SIGKILLed because its output had not ended or it had not exited by the deadline.
  bool timed_out = false;
  // How it ended, once reaped here; unset when it was not (gone already: ECHILD, or it
  // survived SIGKILL for kill_grace), see reaped.
  std::optional<ExitStatus> exit;
  bool reaped = false;  // no longer our child (reaped here or elsewhere)
  absl::Status error;   // a poll/read failure while waiting (then treated as timed out)
};

// Reads every child's output until it ends, then waits for its exit, all within
// `deadline`; kills and reaps those still running then. One result per child, in order.
std::vector<HelperResult> AwaitHelpers(std::vector<HelperChild> children, absl::Time deadline,
                                       const AwaitOptions& options = {});

struct CapturedRun {
  int exit_code = 0;  // the exit code, or 128+N when signal N killed it
  std::string out;    // everything written to stdout
};

// StartHelper + AwaitHelpers for one program. Errors: StartHelper's, or DeadlineExceeded
// after `timeout` ("<argv[0]> did not finish within 5s", or "... closed its output but did
// not exit"), or the poll/read errno.
absl::StatusOr<CapturedRun> RunCaptured(SpawnSpec spec, absl::Duration timeout);

}  // namespace muster

#endif  // MUSTER_LAUNCH_CAPTURED_RUN_H_
