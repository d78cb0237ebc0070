#include "agent/readiness.h"

namespace muster {

Readiness::Health Readiness::Next(std::string_view phase) {
  // "Running" is also the debug phase: the rendezvous completed either way.
  const bool running = phase == "Running";
  if (running) ready_ = true;
  return {.ready = ready_, .workers_running = running};
}

}  // namespace muster
