#include "agent/lifecycle/readiness.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(Readiness, RendezvousHostIsReadyBeforeAnyRound) {
  Readiness readiness(/*hosts_rendezvous=*/true);
  Readiness::Health h = readiness.Next(AgentPhase::kRendezvous);
  EXPECT_TRUE(h.ready);
  EXPECT_FALSE(h.workers_running);
}

TEST(Readiness, OtherAgentIsReadyFromItsFirstRoundAndStaysReady) {
  Readiness readiness(/*hosts_rendezvous=*/false);
  EXPECT_FALSE(readiness.Next(AgentPhase::kRendezvous).ready);
  Readiness::Health running = readiness.Next(AgentPhase::kRunning);
  EXPECT_TRUE(running.ready);
  EXPECT_TRUE(running.workers_running);
  for (AgentPhase phase : {AgentPhase::kStopping, AgentPhase::kRendezvous, AgentPhase::kFailed}) {
    Readiness::Health h = readiness.Next(phase);
    EXPECT_TRUE(h.ready) << AgentPhaseName(phase);
    EXPECT_FALSE(h.workers_running) << AgentPhaseName(phase);
  }
}

}  // namespace
}  // namespace muster
