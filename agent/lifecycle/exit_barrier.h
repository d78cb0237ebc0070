// ExitBarrier: the bound on the exit barrier (docs/guides/stopping-workers.md "The exit
// barrier"), a component of the agent (agent/lifecycle/agent_component.h).
//
// A node whose workers all exited 0 waits for the job's word (kCleaningUp, then kAtBarrier):
// the job's success, a next round, or its failure. That wait is as long as the rest of the
// job runs. With --exit-barrier-timeout (torchrun's rdzv-conf exit_barrier_timeout, a fixed
// 300 s there) it ends that long after the last local worker exited 0: the node leaves the
// job, saying why, and exits 138 (the job's outcome is not known: worth another try).
// Any word of the job (a round, a stop, the outcome) disarms it.
#ifndef MUSTER_AGENT_LIFECYCLE_EXIT_BARRIER_H_
#define MUSTER_AGENT_LIFECYCLE_EXIT_BARRIER_H_

#include "absl/time/time.h"
#include "agent/lifecycle/agent_component.h"
#include "base/event_loop.h"

namespace muster {

class ExitBarrier final : public AgentComponent {
 public:
  ~ExitBarrier() override;

  absl::Status Start(AgentControl& agent) override;
  bool OnWorkerExit(const WorkerExit& exit) override;
  bool OnRendezvousEvent(const rdzv::Event& event) override;

 private:
  void Disarm();
  void Expire();

  AgentControl* agent_ = nullptr;
  EventLoop::TimerId timer_ = 0;  // armed while this node waits at the barrier
};

}  // namespace muster

#endif  // MUSTER_AGENT_LIFECYCLE_EXIT_BARRIER_H_
