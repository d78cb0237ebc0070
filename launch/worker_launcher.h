// WorkerLauncher: what the agent asks of launch/ — start one attempt's workers from their
// specs, say how each ended, stop them all. launch/worker_group.h is the real one
// (processes, output pumps, watchdog); agent tests use a fake that ends workers on cue.
//
// Callbacks run on the loop thread, posted, never re-entrantly from inside a method.
// Not thread-safe: every method is called from the agent's loop thread.
#ifndef MUSTER_LAUNCH_WORKER_LAUNCHER_H_
#define MUSTER_LAUNCH_WORKER_LAUNCHER_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "launch/error_file.h"
#include "launch/exit_status.h"
#include "launch/stuck_process.h"
#include "launch/worker_source.h"
#include "launch/worker_spec.h"

namespace muster {

// How one worker ended.
struct WorkerExit {
  WorkerPlacement placement;
  pid_t pid = 0;
  // exit code, or 128+signal, or 126/127 when it could not be executed, or 138 when no
  // process could be made for it (fork's EAGAIN/ENOMEM: transient)
  int code = 0;
  int signal = 0;                    // the signal that killed it, 0 when it exited
  bool exec_failed = false;          // 126/127: fatal under every policy
  bool while_stopping = false;       // the group was being stopped (not a failure of its own)
  std::string what;                  // "exit 1", "signal 9 (SIGKILL)", "cannot execute ..."
  std::optional<WorkerError> error;  // from TORCHELASTIC_ERROR_FILE
  // Its last lines of stderr (OutputTail::Text: printable, <= 20 lines, <= 4 KB) when it
  // failed on its own; "" otherwise.
  std::string stderr_tail;
  std::string dir;  // its own directory (WorkerSpec::dir)
};

// What one worker of the current (or last) attempt is doing, for status reports.
struct WorkerView {
  WorkerPlacement placement;
  pid_t pid = 0;                           // 0: it never started
  std::optional<ExitStatus> status;        // unset while it runs
  std::string dir;                         // its own directory (WorkerSpec::dir)
  WorkerStart start = WorkerStart::kExec;  // how its source started it
  std::string fallback;  // why it was exec'd where a fork was asked for (--warm-start), or empty
};

class WorkerLauncher {
 public:
  struct Callbacks {
    std::function<void(const WorkerExit&)> on_exit;
    std::function<void()> on_stopped;  // Stop() finished: nothing of the attempt is left
  };

  virtual ~WorkerLauncher() = default;

  // Once, before anything starts.
  virtual void SetCallbacks(Callbacks callbacks) = 0;
  // Starts one worker per spec, in order, for attempt `attempt`. Fails only for local
  // problems (directories, pipes); a worker that cannot be executed is reported through
  // on_exit with code 126/127 (138 when fork failed for want of processes or memory), and
  // the workers after it are not started.
  virtual absl::Status Start(int attempt, std::vector<WorkerSpec> specs) = 0;
  // Debug mode: one process running `argv` with the environment `env`, supervised (output,
  // signals, cleanup) like a worker.
  virtual absl::Status StartCommand(std::vector<std::string> argv,
                                    std::vector<std::string> env) = 0;
  // Idempotent: starts stopping with `sig` (while stopping, a different signal is forwarded
  // too); when nothing runs, on_stopped follows at once.
  virtual void Stop(int sig) = 0;
  // As Stop, with `grace` from `sig` to SIGKILL instead of the launcher's shutdown timeout
  // (--restart-grace: a stop for a next round).
  virtual void StopWithin(int sig, absl::Duration grace) = 0;
  // SIGKILL now, without waiting for the grace period.
  virtual void Escalate() = 0;
  // SIGCHLD arrived: reap every exited child (workers and adopted orphans).
  virtual void OnChildSignal() = 0;

  virtual std::vector<WorkerView> Workers() const = 0;
  // The containment mode in force and why (launch/containment.h), for status reports.
  virtual std::string containment() const { return ""; }
  virtual bool running() const = 0;
  virtual bool stopping() const = 0;
  // Every worker of the attempt exited 0.
  virtual bool AllSucceeded() const = 0;
  // What the last stop gave up on: processes of the attempt that SIGKILL had not ended
  // within the kill grace (uninterruptible sleep), as they were then; empty otherwise.
  virtual std::vector<StuckProcess> Stuck() const = 0;

  // Teardown, around the agent's own: BeginShutdown lets helpers (watchdog, console
  // writer) wind down while the agent works; FinishShutdown waits for the workers' last
  // output to reach the console, so the agent's summary comes after it.
  virtual void BeginShutdown() = 0;
  virtual void FinishShutdown() = 0;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_WORKER_LAUNCHER_H_
