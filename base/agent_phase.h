// AgentPhase: the phase an agent publishes about itself, the one vocabulary that its
// --status-file ("phase"), its health service (agent/lifecycle/readiness.h) and its metrics
// (muster_agent_phase{phase}) share. The agent's own state machine has finer states
// (agent/lifecycle/agent.h); this is what others are told. AgentPhaseName is the only spelling:
// the names are an API (status files are read by scripts and operators).
#ifndef MUSTER_BASE_AGENT_PHASE_H_
#define MUSTER_BASE_AGENT_PHASE_H_

#include <array>

namespace muster {

enum class AgentPhase {
  kRendezvous,  // joining a round (or about to)
  kRunning,     // the round's workers run (also debug mode: the rendezvous completed)
  kStopping,    // stopping the workers: cleanup, the exit barrier, a restart
  kPreempting,  // a preemption notice: checkpoint grace, then the node goes
  kSucceeded,   // the job ended with every worker exiting 0
  kFailed,      // the job ended otherwise
  kExcluded,    // joined, but its health gate keeps the node out of rounds until it passes
  kSpare,       // joined, healthy, a hot spare: the full round has no place for it
};

// Every phase, in the order above (metrics export one series per phase).
inline constexpr std::array<AgentPhase, 8> kAgentPhases = {
    AgentPhase::kRendezvous, AgentPhase::kRunning, AgentPhase::kStopping, AgentPhase::kPreempting,
    AgentPhase::kSucceeded,  AgentPhase::kFailed,  AgentPhase::kExcluded, AgentPhase::kSpare};

// "Rendezvous", "Running", "Stopping", "Preempting", "Succeeded", "Failed", "Excluded",
// "Spare".
const char* AgentPhaseName(AgentPhase phase);

}  // namespace muster

#endif  // MUSTER_BASE_AGENT_PHASE_H_
