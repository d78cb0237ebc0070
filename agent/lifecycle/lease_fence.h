// LeaseFence: the agent's hard fence (docs/operations/liveness-and-partitions.md "etcd backend:
// the lease and the fence"), a component of the agent (agent/lifecycle/agent_component.h).
//
// An agent cut off from etcd learns, with the rendezvous error, the earliest moment etcd may
// drop its lease and key (rendezvous/rendezvous_error.h); from then on the other nodes may
// start a round on this node's ranks. The workers got SIGTERM with the error; whatever is
// left of them at that moment gets SIGKILL, however long --shutdown-timeout is (a
// checkpoint in a SIGTERM handler would otherwise run on beside the survivors' new round: a
// split brain).
#ifndef MUSTER_AGENT_LIFECYCLE_LEASE_FENCE_H_
#define MUSTER_AGENT_LIFECYCLE_LEASE_FENCE_H_

#include "absl/time/time.h"
#include "agent/lifecycle/agent_component.h"

namespace muster {

class LeaseFence : public AgentComponent {
 public:
  absl::Status Start(AgentControl& agent) override {
    agent_ = &agent;
    return absl::OkStatus();
  }
  void OnRendezvousError(const rdzv::RendezvousError& error) override;

 private:
  void KillAt(absl::Time kill_by);
  void Kill();

  AgentControl* agent_ = nullptr;
  bool armed_ = false;  // once: a second error with a kill-by time changes nothing
};

}  // namespace muster

#endif  // MUSTER_AGENT_LIFECYCLE_LEASE_FENCE_H_
