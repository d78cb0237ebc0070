#include "agent/readiness.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(Readiness, RendezvousHostIsReadyBeforeAnyRound) {
  Readiness readiness(/*hosts_rendezvous=*/true);
  Readiness::Health h = readiness.Next("Rendezvous");
  EXPECT_TRUE(h.ready);
  EXPECT_FALSE(h.workers_running);
}

TEST(Readiness, OtherAgentIsReadyFromItsFirstRoundAndStaysReady) {
  Readiness readiness(/*hosts_rendezvous=*/false);
  EXPECT_FALSE(readiness.Next("Rendezvous").ready);
  Readiness::Health running = readiness.Next("Running");
  EXPECT_TRUE(running.ready);
  EXPECT_TRUE(running.workers_running);
  for (const char* phase : {"Stopping", "Rendezvous", "Failed"}) {
    Readiness::Health h = readiness.Next(phase);
    EXPECT_TRUE(h.ready) << phase;
    EXPECT_FALSE(h.workers_running) << phase;
  }
}

}  // namespace
}  // namespace muster
