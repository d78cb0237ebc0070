// WorkerGroup: this node's workers for one round at a time. Spawns them with their
// environment and log files, pumps their output, takes their exits (the agent reaps and
// hands them over), and stops them: SIGTERM (or the agent's signal) to every worker's
// process group, SIGKILL after --shutdown-timeout, then whatever the job left behind
// (session members, orphans the subreaper adopted). Reports through callbacks that run
// on the loop thread, never re-entrantly from inside a method.
//
// Owned by the Agent; borrows the loop, console, watchdog and event log. Not thread-safe.
#ifndef MUSTER_AGENT_WORKER_GROUP_H_
#define MUSTER_AGENT_WORKER_GROUP_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/config.h"
#include "agent/event_log.h"
#include "agent/worker_env.h"
#include "base/event_loop.h"
#include "launch/console_writer.h"
#include "launch/error_file.h"
#include "launch/exit_status.h"
#include "launch/spawner.h"
#include "launch/watchdog.h"
#include "launch/worker_output.h"

namespace muster {

// How one worker ended.
struct WorkerExit {
  WorkerPlacement placement;
  pid_t pid = 0;
  int code = 0;    // exit code, or 128+signal, or 126/127 when it could not start
  int signal = 0;  // the signal that killed it, 0 when it exited
  bool exec_failed = false;
  bool while_stopping = false;       // the group was being stopped (not a failure of its own)
  std::string what;                  // "exit 1", "signal 9 (SIGKILL)", "cannot execute ..."
  std::optional<WorkerError> error;  // from TORCHELASTIC_ERROR_FILE
};

class WorkerGroup {
 public:
  struct Callbacks {
    std::function<void(const WorkerExit&)> on_exit;
    std::function<void()> on_stopped;  // Stop() finished: nothing of the group is left
  };

  WorkerGroup(const Config& config, std::string hostname, std::string run_dir, EventLoop* loop,
              ConsoleWriter* console, Watchdog* watchdog, EventLog* events, Callbacks callbacks);
  ~WorkerGroup();

  // Spawns config.nproc_per_node workers for `round`. Fails only for local problems
  // (directories, pipes); a worker that cannot be executed is reported through on_exit
  // with code 126/127.
  absl::Status Start(int group_rank, int rank_base, int world_size, int group_world_size,
                     const RoundInfo& round);
  // Debug mode: one process running `argv` with the agent's own environment, supervised
  // (output, signals, cleanup) like a worker.
  absl::Status StartCommand(const std::vector<std::string>& argv);
  // Idempotent: starts stopping with `sig` (no-op while already stopping, except that a
  // different signal is forwarded too); when idle, on_stopped follows at once.
  void Stop(int sig);
  // SIGKILL now, without waiting for the grace period.
  void Escalate();
  // A child exited (reaped by the agent). Returns false when it is not a worker.
  bool OnChildExited(pid_t pid, int wstatus);
  // While stopping, re-checks what is left (called after any reap).
  void OnReaped();

  // The console has room again: resume reading paused output pipes.
  void ResumeOutput();

  // What each worker of the current (or last) round is doing, for status reports.
  struct WorkerView {
    WorkerPlacement placement;
    pid_t pid = 0;
    std::optional<ExitStatus> status;  // unset while it runs
  };
  std::vector<WorkerView> Workers() const;

  bool running() const { return state_ == State::kRunning; }
  bool stopping() const { return state_ == State::kStopping; }
  bool AllSucceeded() const;
  size_t size() const { return workers_.size(); }
  // For signals to leftovers: everything but the agent's own helpers is fair game.
  pid_t watchdog_pid() const { return watchdog_->pid(); }

 private:
  enum class State { kIdle, kRunning, kStopping };
  struct Worker {
    WorkerPlacement placement;
    pid_t pid = 0;
    std::optional<ExitStatus> status;
    std::string error_file;
    std::unique_ptr<WorkerOutput> output;
  };

  // Spawns `spec` (its stdio wired to w.output); on failure reports the exit (126/127)
  // and returns false.
  bool SpawnWorker(Worker& w, SpawnSpec spec);
  void SignalLeftovers(int sig);
  void MaybeFinishStop();
  void ReportExit(const Worker& w, WorkerExit exit);

  const Config& config_;
  std::string hostname_;
  std::string run_dir_;
  EventLoop* loop_;
  ConsoleWriter* console_;
  Watchdog* watchdog_;
  EventLog* events_;
  Callbacks callbacks_;

  State state_ = State::kIdle;
  int attempt_ = 0;
  std::vector<Worker> workers_;
  int stop_signal_ = 0;
  absl::Time stop_started_;
  EventLoop::TimerId stop_timer_ = 0, kill_timer_ = 0;
};

}  // namespace muster

#endif  // MUSTER_AGENT_WORKER_GROUP_H_
