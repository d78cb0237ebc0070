// The agent's wiring: builds the real collaborators for `muster run` (docs/design.md §2: "main.cc
// wires the gRPC implementations in") and runs the Agent with them. The only part of the
// agent that knows the rendezvous transport: one node gets the in-process rendezvous, a
// job with --rdzv-endpoint the gRPC client, plus the gRPC server when this node hosts it.
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
