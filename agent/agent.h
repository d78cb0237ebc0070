// Agent: supervises this node's worker group from start to the job's outcome.
//
// One thread, one EventLoop: a signalfd carries both child exits (SIGCHLD) and
// the signals the agent handles; worker output pipes and the stop deadline are
// loop events too, so a worker's death is seen within a millisecond and an idle
// agent never wakes. The agent is a child subreaper: orphans of the job are
// reaped here, and cleanup after each attempt removes every process the job
// started (DESIGN §3, §4.4, §4.5).
//
// Single node in this build: a restart stops all local workers and starts the
// group again with TORCHELASTIC_RESTART_COUNT+1. Not thread-safe; Run() is
// called once, from main.
#ifndef MUSTER_AGENT_AGENT_H_
#define MUSTER_AGENT_AGENT_H_

#include <sys/types.h>

#include <map>
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
#include "base/unique_fd.h"
#include "launch/console_writer.h"
#include "launch/error_file.h"
#include "launch/exit_status.h"
#include "launch/restart_policy.h"
#include "launch/watchdog.h"
#include "launch/worker_output.h"
#include "rendezvous/c10d/store_server.h"

namespace muster {

class Agent {
 public:
  Agent(Config config, std::map<std::string, std::string> env);
  ~Agent();

  // Runs the job; returns the agent's exit code (DESIGN §4.4).
  int Run();

 private:
  struct Worker {
    WorkerPlacement placement;
    pid_t pid = 0;
    std::optional<ExitStatus> status;
    std::string error_file;
    std::unique_ptr<WorkerOutput> output;
  };
  struct Failure {
    WorkerPlacement placement;
    pid_t pid = 0;
    int code = 0;
    std::string what;  // "exit 1" / "signal 9 (SIGKILL)" / "cannot execute ..."
    ExitVerdict verdict = ExitVerdict::kFatal;
    std::optional<WorkerError> error;
  };
  enum class Phase { kRunning, kStopping, kDone };
  enum class StopReason { kSucceeded, kFailed, kSignaled };

  absl::Status Setup();
  absl::Status PrepareRunDir();
  absl::Status StartAttempt();
  void OnSignalFd();
  void ReapChildren();
  void OnWorkerExit(Worker& w, ExitStatus status);
  void RecordFailure(const Worker& w, int code, std::string what, ExitVerdict verdict);
  void BeginStop(StopReason reason, int sig);
  void Escalate();
  // Signals what is left of the job (worker groups, sessions, adopted orphans)
  // with `sig`.
  void SignalLeftovers(int sig);
  void MaybeFinishStop();
  void FinishAttempt();
  void Finish(int exit_code);
  std::string DescribeFailure(const Failure& f) const;

  Config config_;
  std::map<std::string, std::string> env_;
  std::string hostname_;
  std::unique_ptr<EventLoop> loop_;
  UniqueFd signal_fd_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<ConsoleWriter> console_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<c10d::StoreServer> store_;  // this attempt's store (--store agent)

  std::string log_root_, run_dir_;
  bool remove_log_root_ = false;
  std::string run_id_;
  int restart_count_ = 0;
  std::vector<Worker> workers_;

  Phase phase_ = Phase::kRunning;
  StopReason stop_reason_ = StopReason::kSucceeded;
  int stop_signal_ = 0;  // the signal leftovers get now (SIGTERM, then SIGKILL)
  absl::Time stop_started_;
  EventLoop::TimerId stop_timer_ = 0;
  int agent_signal_ = 0;  // signal that stopped the agent, 0 if none
  std::optional<Failure> root_cause_;
  std::optional<int> exit_code_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_AGENT_H_
