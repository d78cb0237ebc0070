// The agent's wiring: builds the real collaborators for `muster run` (docs/design.md §2) and
// runs the Agent with them. The rendezvous comes from the config's backend
// (agent/cli/backends/rendezvous_backend.h): the in-process one on one node, muster's own
// gRPC client (plus its server where this node hosts it), or etcd's.
#ifndef MUSTER_AGENT_WIRING_H_
#define MUSTER_AGENT_WIRING_H_

#include "agent/config/run_plan.h"

namespace muster {

// Runs `muster run` as `plan` says (agent/config/run_plan.h: resolved, never changed after);
// returns the agent's exit code (docs/design.md §4.4). Call from main before any thread
// starts: it blocks the agent's signals and forks the watchdog first.
int RunAgent(RunPlan plan);

}  // namespace muster

#endif  // MUSTER_AGENT_WIRING_H_
