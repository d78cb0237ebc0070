#include "rendezvous/core/conditions.h"

#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(ConditionsTest, StartWithCreatedTrueAndTheRestFalse) {
  Conditions c(kT0);
  ASSERT_EQ(c.all().size(), 5u);
  EXPECT_EQ(c.all()[0].type, "Created");
  EXPECT_TRUE(c.Find(kConditionCreated)->status);
  for (const char* t :
       {kConditionRunning, kConditionRestarting, kConditionSucceeded, kConditionFailed}) {
    ASSERT_NE(c.Find(t), nullptr) << t;
    EXPECT_FALSE(c.Find(t)->status) << t;
    EXPECT_EQ(c.Find(t)->last_transition, kT0) << t;
    EXPECT_FALSE(c.Find(t)->reason.empty()) << t;
  }
  EXPECT_EQ(c.Find("NoSuchType"), nullptr);
}

TEST(ConditionsTest, TransitionTimeMovesOnlyWhenTheStatusFlips) {
  Conditions c(kT0);
  c.Set(kConditionRunning, true, "RoundStarted", "round 1", kT0 + absl::Seconds(5));
  EXPECT_EQ(c.Find(kConditionRunning)->last_transition, kT0 + absl::Seconds(5));
  // Same status, new reason and message: the time stays.
  c.Set(kConditionRunning, true, "RoundStarted", "round 1 again", kT0 + absl::Seconds(9));
  EXPECT_EQ(c.Find(kConditionRunning)->last_transition, kT0 + absl::Seconds(5));
  EXPECT_EQ(c.Find(kConditionRunning)->message, "round 1 again");
  c.Set(kConditionRunning, false, "WorkerFailed", "rank 3 failed", kT0 + absl::Seconds(12));
  EXPECT_FALSE(c.Find(kConditionRunning)->status);
  EXPECT_EQ(c.Find(kConditionRunning)->reason, "WorkerFailed");
  EXPECT_EQ(c.Find(kConditionRunning)->last_transition, kT0 + absl::Seconds(12));
  // Setting False on a condition that is False keeps its original time.
  c.Set(kConditionFailed, false, "NotFinished", "still going", kT0 + absl::Seconds(20));
  EXPECT_EQ(c.Find(kConditionFailed)->last_transition, kT0);
  // Unknown types are ignored, not added.
  c.Set("Bogus", true, "X", "y", kT0);
  EXPECT_EQ(c.all().size(), 5u);
}

}  // namespace
}  // namespace muster::rdzv
