// SparePhase: what a hot spare's agent shows (docs/guides/spares.md). The job tells a node
// that a full round has no place for it (rdzv::Event::spare on a progress event); while so,
// the agent publishes the phase Spare (status file, health service, muster_agent_phase) and
// writes one `spare` event to --event-log each time it becomes a spare. A round it is taken
// into ends it. Nothing else changes: a spare is an agent in its rendezvous phase, with no
// workers and, with --warm-start, its template started before the join.
#ifndef MUSTER_AGENT_HEALTH_SPARE_PHASE_H_
#define MUSTER_AGENT_HEALTH_SPARE_PHASE_H_

#include "absl/status/status.h"
#include "agent/lifecycle/agent_component.h"

namespace muster {

class SparePhase : public AgentComponent {
 public:
  absl::Status Start(AgentControl& agent) override;
  bool OnRendezvousEvent(const rdzv::Event& event) override;
  void Describe(PublishedState& state) const override;

 private:
  AgentControl* agent_ = nullptr;
  bool spare_ = false;
};

}  // namespace muster

#endif  // MUSTER_AGENT_HEALTH_SPARE_PHASE_H_
