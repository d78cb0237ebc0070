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
// agent names no transport; features that need its events (preemption, trace collection,
// the lease fence) come in as components (agent/lifecycle/agent_component.h), so its
// handlers name no feature. Not thread-safe; Run() is called once, from main.
#ifndef MUSTER_AGENT_AGENT_H_
#define MUSTER_AGENT_AGENT_H_

#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/config/run_plan.h"
#include "agent/lifecycle/agent_component.h"
#include "agent/lifecycle/agent_parts.h"
#include "agent/lifecycle/event_log.h"
#include "agent/lifecycle/run_dir.h"
#include "agent/lifecycle/status_file.h"
#include "agent/workers/worker_specs.h"
#include "rendezvous/core/types.h"

namespace muster {

class HangWatch;  // agent/diagnostics/hang_watch.h

class Agent final : private AgentControl {
 public:
  using Phase = LifecyclePhase;

  Agent(RunPlan plan, AgentParts parts);
  ~Agent();

  // A feature that observes the agent's events (agent/lifecycle/agent_component.h); before
  // Run(). Components are called in the order they were added.
  void Add(std::unique_ptr<AgentComponent> component);

  // Runs the job; returns the agent's exit code (docs/design.md §4.4).
  int Run();

  Phase phase() const override { return phase_; }

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
  void StopWorkers(Phase next, int sig) override;
  // Opens a fresh store and tells the job this node's workers are stopped.
  void ReportStopped();
  // Stops what runs (with `sig`), then exits as `plan` says.
  void ExitAfterStop(ExitPlan plan, int sig = SIGTERM);
  void Finish() override;
  bool done() const { return phase_ == Phase::kSucceeded || phase_ == Phase::kFailed; }
  // Rewrites --status-file and the health service's state for the current phase.
  void Publish() override;
  // --status-file's document for the current phase, but the phase (Publish adds it last).
  void FillStatus(nlohmann::json& doc) const;
  // The job's hang (docs/guides/hangs-and-stacks.md "Hangs") while the round it ended is the last:
  // its failure.
  const rdzv::Failure* HangShown() const;
  void Teardown();
  void ReleaseDebugDirIfHeld();

  // AgentControl, for the components.
  const Config& config() const override { return config_; }
  EventLoop& loop() override { return *loop_; }
  WorkerLauncher& launcher() override { return *launcher_; }
  rdzv::RendezvousClient* rendezvous() override { return rdzv_; }
  EventLog& events() override { return *events_; }
  const rdzv::NodeInfo& node() const override { return node_; }
  const std::string& run_dir() const override { return run_dir_.path; }
  int round() const override { return round_; }
  const rdzv::Outcome* outcome() const override { return outcome_ ? &*outcome_ : nullptr; }
  bool ClaimStop(int sig) override;
  void ExitAfterStop(int code, std::string summary, int sig) override;
  void Deliver(const rdzv::Event& event) override { OnRendezvousEvent(event); }
  void AddToSummary(const std::string& line) override;

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
  // After parts_: a component's timers and watches are on the loop.
  std::vector<std::unique_ptr<AgentComponent>> components_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_AGENT_H_
