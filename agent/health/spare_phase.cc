#include "agent/health/spare_phase.h"

#include "agent/lifecycle/event_log.h"

namespace muster {

absl::Status SparePhase::Start(AgentControl& agent) {
  agent_ = &agent;
  return absl::OkStatus();
}

bool SparePhase::OnRendezvousEvent(const rdzv::Event& event) {
  bool spare = spare_;
  if (event.kind == rdzv::Event::Kind::kProgress) spare = event.spare;
  if (event.kind == rdzv::Event::Kind::kRoundStarted) spare = false;
  if (spare == spare_) return false;
  spare_ = spare;
  if (spare_) agent_->events().Write("spare", {{"round", agent_->round()}});
  agent_->Publish();
  return false;  // the agent logs the progress and starts the round as before
}

void SparePhase::Describe(PublishedState& state) const {
  // The health gate's Excluded wins: a sick node is not a spare.
  if (spare_ && agent_->phase() == LifecyclePhase::kRendezvous &&
      state.phase == AgentPhase::kRendezvous) {
    state.phase = AgentPhase::kSpare;
  }
}

}  // namespace muster
