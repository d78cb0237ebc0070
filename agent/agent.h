// Agent: this node's part of a job, from start to the job's outcome (DESIGN §3).
//
// One thread, one EventLoop: a signalfd carries child exits (SIGCHLD) and the signals the
// agent handles; worker output, timers and rendezvous events (posted from other threads)
// are loop events too, so a worker's death is seen within a millisecond and an idle agent
// never wakes. The agent is a child subreaper and reaps every orphan.
//
// Decisions that concern the whole job (restart or not, restart budget, outcome) belong to
// the rendezvous (rendezvous/core's Job, in-process for one node, over gRPC for many); the
// agent classifies its own workers' exits with the restart policy, reports them, and does
// what the job says: start a round's workers, stop them, or exit with the job's code.
// Not thread-safe; Run() is called once, from main.
#ifndef MUSTER_AGENT_AGENT_H_
#define MUSTER_AGENT_AGENT_H_

#include <signal.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "agent/config.h"
#include "agent/event_log.h"
#include "agent/status_file.h"
#include "agent/worker_group.h"
#include "base/event_loop.h"
#include "base/unique_fd.h"
#include "launch/console_writer.h"
#include "launch/watchdog.h"
#include "rendezvous/c10d/store_server.h"
#include "rendezvous/client.h"
#include "rendezvous/core/types.h"
#include "rendezvous/grpc/health_server.h"
#include "rendezvous/grpc/server.h"

namespace muster {

class Agent {
 public:
  explicit Agent(Config config);
  ~Agent();

  // Runs the job; returns the agent's exit code (DESIGN §4.4).
  int Run();

 private:
  // Why the local workers are being stopped, which decides what follows.
  enum class StopCause { kNone, kSucceeded, kFailed, kJobRequest, kExiting };

  absl::Status Setup();
  // --rdzv-endpoint given: a gRPC client, plus the embedded server when this node hosts it.
  absl::Status SetupGrpcRendezvous();
  absl::Status PrepareRunDir();
  // A fresh c10d store for the next round (--store agent); returns its port, 0 otherwise.
  absl::StatusOr<int> OpenFreshStore();
  void OnSignalFd();
  void ReapChildren();
  void OnWorkerExit(const WorkerExit& exit);
  void OnWorkersStopped();
  void OnRendezvousEvent(const rdzv::Event& event);
  void OnRendezvousError(const absl::Status& error);
  void StartRound(const rdzv::Assignment& a);
  void StartDebugCommand(const rdzv::Assignment& a, RoundInfo round);
  void StopWorkers(StopCause cause, int sig);
  // Opens a fresh store and tells the job this node's workers are stopped.
  void ReportStopped();
  // Stops what runs (with `sig`), then exits with `code`, logging `summary` last.
  void ExitAfterStop(int code, std::string summary, bool error, int sig = SIGTERM);
  void Finish(int code);
  // Rewrites --status-file and the health service's state for `phase`.
  void Publish(const std::string& phase);

  Config config_;
  std::string hostname_;
  std::unique_ptr<EventLoop> loop_;
  UniqueFd signal_fd_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<ConsoleWriter> console_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<StatusFile> status_file_;
  std::unique_ptr<rdzv::HealthServer> health_;
  std::optional<rdzv::Assignment> assignment_;  // the current round's
  std::unique_ptr<c10d::StoreServer> store_;
  std::unique_ptr<WorkerGroup> group_;
  std::unique_ptr<rdzv::RendezvousServer> server_;  // when this node hosts the rendezvous
  std::unique_ptr<rdzv::RendezvousClient> rdzv_;

  std::string log_root_, run_dir_;
  bool remove_log_root_ = false;
  std::string run_id_;
  rdzv::NodeInfo node_;

  int round_ = 0;
  int restart_count_ = 0;
  bool job_asked_stop_ = false;  // the job sent kStopWorkers for the current round
  StopCause stop_cause_ = StopCause::kNone;
  bool stop_pending_ = false;  // a WorkerGroup::Stop() whose on_stopped has not run yet
  int agent_signal_ = 0;
  std::optional<int> pending_exit_;
  std::string summary_;
  bool summary_is_error_ = false;
  std::optional<rdzv::Outcome> outcome_;
  std::optional<rdzv::Event> last_stop_;  // the job's last kStopWorkers, for the event log
  std::optional<int> exit_code_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_AGENT_H_
