#include "base/agent_phase.h"

namespace muster {

const char* AgentPhaseName(AgentPhase phase) {
  switch (phase) {
    case AgentPhase::kRendezvous:
      return "Rendezvous";
    case AgentPhase::kRunning:
      return "Running";
    case AgentPhase::kStopping:
      return "Stopping";
    case AgentPhase::kPreempting:
      return "Preempting";
    case AgentPhase::kSucceeded:
      return "Succeeded";
    case AgentPhase::kFailed:
      return "Failed";
    case AgentPhase::kExcluded:
      return "Excluded";
    case AgentPhase::kSpare:
      return "Spare";
  }
  return "Unknown";
}

}  // namespace muster
