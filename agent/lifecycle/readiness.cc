#include "agent/lifecycle/readiness.h"

namespace muster {

Readiness::Health Readiness::Next(AgentPhase phase) {
  // kRunning is also the debug phase: the rendezvous completed either way.
  const bool running = phase == AgentPhase::kRunning;
  if (running) ready_ = true;
  return {.ready = ready_, .workers_running = running};
}

}  // namespace muster
