// AgentComponent: a feature that observes the agent's events through one narrow interface
// instead of a hook in the agent's core handlers (docs/design.md §3 "Components"):
// preemption (agent/preempt/preemption.h), trace collection
// (agent/diagnostics/trace_collection.h), the lease fence (agent/lifecycle/lease_fence.h) and
// the health gate (agent/health/health_gate.h).
//
// The Agent holds a list of components and calls each at a few points of its lifecycle,
// in the order they were added; a component answers through the return values (take an
// event, hold the finish) and acts through AgentControl, what the agent lets a component
// read and ask. The Agent names no component; each is added where the Agent is built
// (agent/cli/wiring.cc, agent/lifecycle/agent_test.cc). Loop thread only.
#ifndef MUSTER_AGENT_AGENT_COMPONENT_H_
#define MUSTER_AGENT_AGENT_COMPONENT_H_

#include <string>

#include "absl/status/status.h"
#include "agent/config/config.h"
#include "agent/lifecycle/event_log.h"
#include "base/agent_phase.h"
#include "base/event_loop.h"
#include "launch/worker_launcher.h"
#include "nlohmann/json.hpp"
#include "rendezvous/client.h"
#include "rendezvous/core/types.h"

namespace muster {

// Where the agent is in its lifecycle (docs/design.md §3).
enum class LifecyclePhase {
  kInit,        // before the rendezvous starts
  kRendezvous,  // joined, or stopped and reported: waiting for the next round
  kRunning,     // the round's workers run
  kDebug,       // debug mode: the debug command runs instead of the workers
  kCleaningUp,  // the workers' part of the round is over (every local worker exited 0, or
                // a component ended it): stopping whatever they left behind
  kAtBarrier,   // ... done; waiting for the rest of the job (the exit barrier, the job's word)
  kRestarting,  // stopping the workers because the job goes to a next round
  kExiting,     // stopping the workers, then exiting as the exit plan says
  kSucceeded,   // done: Run() returns 0
  kFailed,      // done: Run() returns the exit plan's code
};

// What a component may read of the agent and ask of it (the Agent implements it).
class AgentControl {
 public:
  virtual const Config& config() const = 0;
  virtual EventLoop& loop() = 0;
  virtual WorkerLauncher& launcher() = 0;
  // Null once the agent's teardown began.
  virtual rdzv::RendezvousClient* rendezvous() = 0;
  virtual EventLog& events() = 0;
  virtual const rdzv::NodeInfo& node() const = 0;
  // This run's directory: workers' logs, dumps (agent/lifecycle/run_dir.h).
  virtual const std::string& run_dir() const = 0;
  virtual LifecyclePhase phase() const = 0;
  virtual int round() const = 0;  // the current round's number, 0 before the first
  // The job's outcome once it is known, else null.
  virtual const rdzv::Outcome* outcome() const = 0;

  // The agent starts stopping for `sig` (received, or a notice that stands for it): false
  // when it already stopped or is stopping for an earlier one.
  virtual bool ClaimStop(int sig) = 0;
  // Stops the workers; `next` is the phase whose end decides what follows.
  virtual void StopWorkers(LifecyclePhase next, int sig) = 0;
  // Stops what runs with `sig`, then exits with `code`; `summary` is the agent's last line.
  // The first reason to exit is the one that counts.
  virtual void ExitAfterStop(int code, std::string summary, int sig) = 0;
  // An event a component held (OnRendezvousEvent returned true), handled now.
  virtual void Deliver(const rdzv::Event& event) = 0;
  // A finish a component held (HoldFinish returned true): the agent tries again.
  virtual void Finish() = 0;
  // "; `line`" at the end of the exit summary (a no-op before an exit is planned).
  virtual void AddToSummary(const std::string& line) = 0;
  // Rewrites --status-file, the health service's and the metrics' phase.
  virtual void Publish() = 0;

 protected:
  ~AgentControl() = default;
};

// What the agent publishes (--status-file, health, metrics); a component may say more.
struct PublishedState {
  AgentPhase phase;
  nlohmann::json* status = nullptr;  // the --status-file document; null without the flag
};

class AgentComponent {
 public:
  virtual ~AgentComponent() = default;

  // Once, in the agent's setup: the run dir exists, the rendezvous has not started. `agent`
  // outlives the component.
  virtual absl::Status Start(AgentControl& agent) = 0;
  // The agent is about to join the job (`first`: `node` is what the join sends) or to report
  // a round's workers stopped (the next round forms after that report). A component may mark
  // `node` excluded (rdzv::NodeInfo::excluded) for the join, or tell the job through
  // AgentControl::rendezvous() before the report; it returns within a deadline of its own
  // (the health gate, agent/health/health_gate.h).
  virtual void BeforeJoin(rdzv::NodeInfo& /*node*/, bool /*first*/) {}
  // A signal the agent handles. The first: true when the component takes the stop in hand
  // (the agent then neither leaves the job nor stops the workers itself). A later one
  // (`first` false): the agent kills the workers right after, whatever the answer.
  virtual bool OnSignal(int /*sig*/, bool /*first*/) { return false; }
  // A worker ended; the job has been told. True: taken, no restart decision for it.
  virtual bool OnWorkerExit(const WorkerExit& /*exit*/) { return false; }
  // An event of the job. True: taken or held (AgentControl::Deliver hands it back).
  virtual bool OnRendezvousEvent(const rdzv::Event& /*event*/) { return false; }
  // The workers of a round stopped for a next round; the agent reports them stopped next.
  virtual void OnRoundStopped() {}
  // The rendezvous failed; the agent already stops the workers to exit.
  virtual void OnRendezvousError(const rdzv::RendezvousError& /*error*/) {}
  // The agent is about to end. True: it waits until the component calls
  // AgentControl::Finish(), which asks every component again.
  virtual bool HoldFinish() { return false; }
  // Adds to what the agent publishes.
  virtual void Describe(PublishedState& /*state*/) const {}
};

}  // namespace muster

#endif  // MUSTER_AGENT_AGENT_COMPONENT_H_
