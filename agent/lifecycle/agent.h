// Agent: this node's part of a job, from start to the job's outcome (docs/design.md §3).
//
// One thread, one EventLoop: a signalfd carries child exits (SIGCHLD) and the signals the
// agent handles; worker output, timers and rendezvous events (posted from other threads)
// are loop events too, so a worker's death is seen within a millisecond and an idle agent
// never wakes.
//
// Decisions that concern the whole job (restart or not, restart budget, outcome) belong to
// the rendezvous (rendezvous/core's Job, in-process for one node, over gRPC for many); the
// agent classifies its own workers' exits with the restart policy, reports them, and does
// what the job says: start a round's workers, stop them, or exit with the job's code.
//
// Its collaborators come in as AgentParts (agent/cli/wiring.h builds the real ones), so the
// agent names no transport. Not thread-safe; Run() is called once, from main.
#ifndef MUSTER_AGENT_AGENT_H_
#define MUSTER_AGENT_AGENT_H_

#include <signal.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "agent/config/run_plan.h"
#include "agent/lifecycle/agent_parts.h"
#include "agent/lifecycle/event_log.h"
#include "agent/lifecycle/run_dir.h"
#include "agent/lifecycle/status_file.h"
#include "agent/preempt/preempt_file_watch.h"
#include "agent/workers/worker_specs.h"
#include "rendezvous/core/types.h"

namespace muster {

class HangWatch;  // agent/diagnostics/hang_watch.h

class Agent {
 public:
  // Where the agent is in its lifecycle (docs/design.md §3).
  enum class Phase {
    kInit,        // before the rendezvous starts
    kRendezvous,  // joined, or stopped and reported: waiting for the next round
    kRunning,     // the round's workers run
    kDebug,       // debug mode: the debug command runs instead of the workers
    kCleaningUp,  // every local worker exited 0: stopping whatever they left behind
    kAtBarrier,   // ... done; waiting for the rest of the job (the exit barrier)
    kRestarting,  // stopping the workers because the job goes to a next round
    kExiting,     // stopping the workers, then exiting as the exit plan says
    kPreempting,  // a node is being preempted: the workers have the notice and checkpoint
    kPreempted,   // ... they are done (this node was not the one): waiting for the job's word
    kSucceeded,   // done: Run() returns 0
    kFailed,      // done: Run() returns the exit plan's code
  };

  Agent(RunPlan plan, AgentParts parts);
  ~Agent();

  // Runs the job; returns the agent's exit code (docs/design.md §4.4).
  int Run();

  Phase phase() const { return phase_; }

 private:
  // How the agent ends: the first reason to exit is the one that counts.
  struct ExitPlan {
    int code = 0;
    std::string summary;  // the agent's last log line (and the termination log)
    // Lines logged before the summary and written after it to the termination log: the
    // root cause's stderr (StderrBlock).
    std::string details;
    bool is_error = false;
  };

  absl::Status Setup();
  absl::Status PrepareRunDir();
  // A fresh c10d store for the next round (--store agent); returns its port, 0 otherwise.
  absl::StatusOr<int> OpenFreshStore();
  void OnSignalFd();
  void OnAgentSignal(int sig);
  void OnWorkerExit(const WorkerExit& exit);
  void OnWorkersStopped();
  void OnRendezvousEvent(const rdzv::Event& event);
  void OnStopRequested(const rdzv::Event& event);
  void OnFinished(const rdzv::Outcome& outcome);
  void OnRendezvousError(const rdzv::RendezvousError& error);
  void StartRound(const rdzv::Assignment& a);
  void StartWorkers(const NodeRound& round, std::vector<WorkerSpec> specs);
  void StartDebugCommand(const rdzv::Assignment& a, const std::vector<WorkerSpec>& specs);
  void LogRestart(const rdzv::Assignment& a);
  // Stops the workers; `next` is the phase whose end decides what follows. A stop already
  // under way keeps its phase unless the agent is now exiting.
  void StopWorkers(Phase next, int sig);
  // Opens a fresh store and tells the job this node's workers are stopped.
  void ReportStopped();
  // Stops what runs (with `sig`), then exits as `plan` says.
  void ExitAfterStop(ExitPlan plan, int sig = SIGTERM);
  void Finish();
  bool done() const { return phase_ == Phase::kSucceeded || phase_ == Phase::kFailed; }
  // Rewrites --status-file and the health service's state for the current phase.
  void Publish();
  // The job's hang (docs/guides/hangs-and-stacks.md "Hangs") while the round it ended is the last:
  // its failure.
  const rdzv::Failure* HangShown() const;
  void Teardown();
  void ReleaseDebugDirIfHeld();

  // Preemption (agent_preempt.cc, docs/guides/preemption.md).
  struct PreemptState {
    int round = 0;        // the round it concerns
    bool self = false;    // this node is the one preempted: it leaves and exits 143
    bool waiting = true;  // the workers have the notice; the grace runs
    std::string host;     // the preempted node's
    std::string reason;
    absl::Time started;
    EventLoop::TimerId grace_timer = 0;
    EventLoop::TimerId kill_timer = 0;  // self: SIGKILL at started + --shutdown-timeout
    std::optional<rdzv::Event> held;    // kStopWorkers / kFinished, replayed once done
  };
  absl::Status WatchPreemptFile();
  void OnPreemptFile(const std::string& reason);
  // SIGTERM or --preempt-file: tells the job, then the workers. False when no round's
  // workers run here (the caller stops as before).
  bool PreemptSelf(const std::string& reason);
  void OnPreemptNotice(const rdzv::Event& e);
  void BeginPreempt(bool self, const std::string& host, const std::string& reason);
  void EndPreemptWait(const std::string& why);
  // A worker ended while the notice runs: true when taken (no restart decision for it).
  bool TakeWorkerExitWhilePreempting();
  // kStopWorkers / kFinished while the workers checkpoint: true when held back.
  bool HoldWhilePreempting(const rdzv::Event& e);

  // Flight recorder dumps of every node (agent_traces.cc, docs/guides/collective-traces.md).
  struct TraceState {
    int round = 0;          // the round whose dumps were sent
    bool sent = false;      // the backend takes them (the job answers)
    bool complete = false;  // every node of the round still connected has answered
    bool over = false;      // the exit no longer waits
    EventLoop::TimerId timer = 0;
    std::string line;  // "flight recorder traces of 2 nodes (4 files) in HOST:DIR/"
  };
  // After the workers of a round that did not succeed stopped: sends their dump files (or,
  // with `even_without_files`, that there are none). Once per round.
  void UploadTraces(bool even_without_files);
  // Finish() of a failed job: sends this node's dumps and holds the exit (true) until every
  // node's are stored or kTracesWait passed; the summary then names where they are.
  bool HoldFinishForTraces();
  void EndTracesWait(bool finish);
  void OnTracesStored(const rdzv::TracesSummary& t);

  // The fence (agent_fence.cc, docs/operations/liveness-and-partitions.md "etcd backend: the lease
  // and the fence"): a rendezvous error with a kill-by time (rendezvous/rendezvous_error.h) has the
  // workers SIGKILLed by then, whatever
  // --shutdown-timeout says: the other nodes may start without this one from then on.
  void FenceAtKillBy(absl::Time kill_by);
  void KillAtFence();
  bool fence_armed_ = false;  // once: a second error with a kill-by time changes nothing

  const RunPlan plan_;
  const Config& config_ = plan_.config;  // shorthand: the plan's flags
  AgentParts parts_;
  // Shorthands for parts_ members.
  EventLoop* loop_;
  WorkerLauncher* launcher_;
  rdzv::RendezvousClient* rdzv_;

  std::string hostname_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<StatusFile> status_file_;
  std::optional<rdzv::Assignment> assignment_;  // the current round's
  std::unique_ptr<c10d::StoreServer> store_;

  RunDir run_dir_;
  UniqueFd debug_dir_lock_;  // --debug: held while the agent lives (debug_dir_owner.h)
  rdzv::NodeInfo node_;

  Phase phase_ = Phase::kInit;
  std::optional<ExitPlan> exit_plan_;
  int round_ = 0;
  int restart_count_ = 0;
  int agent_signal_ = 0;  // the first signal the agent received, 0 before
  std::optional<rdzv::Outcome> outcome_;
  std::optional<rdzv::Event> last_stop_;  // the job's last kStopWorkers, for the event log
  std::unique_ptr<HangWatch> hang_;       // with --hang-timeout
  std::optional<PreemptState> preempt_;   // the last preemption notice's
  std::unique_ptr<PreemptFileWatch> preempt_watch_;  // --preempt-file
  TraceState traces_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_AGENT_H_
