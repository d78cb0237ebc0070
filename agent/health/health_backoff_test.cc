#include "agent/health/health_backoff.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(HealthBackoffTest, DoublesFromTheFirstWaitUpToTheCap) {
  HealthBackoff b(absl::Seconds(1), absl::Seconds(30));
  EXPECT_EQ(b.Next(), absl::Seconds(1));
  EXPECT_EQ(b.Next(), absl::Seconds(2));
  EXPECT_EQ(b.Next(), absl::Seconds(4));
  EXPECT_EQ(b.Next(), absl::Seconds(8));
  EXPECT_EQ(b.Next(), absl::Seconds(16));
  EXPECT_EQ(b.Next(), absl::Seconds(30));
  EXPECT_EQ(b.Next(), absl::Seconds(30));
  EXPECT_EQ(b.failures(), 7);
}

TEST(HealthBackoffTest, StaysAtTheCapForAsLongAsTheNodeIsSick) {
  HealthBackoff b;  // the gate's defaults: 1 s, at most 30 s
  absl::Duration last;
  for (int i = 0; i < 10000; ++i) last = b.Next();
  EXPECT_EQ(last, HealthBackoff::kMax);
}

TEST(HealthBackoffTest, APassStartsOverAtTheFirstWait) {
  HealthBackoff b(absl::Milliseconds(500), absl::Seconds(10));
  b.Next();
  b.Next();
  EXPECT_EQ(b.Next(), absl::Seconds(2));
  b.Reset();
  EXPECT_EQ(b.failures(), 0);
  EXPECT_EQ(b.Next(), absl::Milliseconds(500));
}

// CheckSchedule (docs/guides/spares.md "Starting spares"): a healthy spare is checked every
// interval while it waits; one that fails goes onto the backoff, whatever the job then says
// of it, and is on the interval again once a check passes and the job calls it a spare.
TEST(CheckScheduleTest, AHealthyNodeThatIsNoSpareIsCheckedOnlyBeforeItsJoins) {
  CheckSchedule s(absl::Seconds(30));
  EXPECT_EQ(s.Checked(true), std::nullopt);
  std::optional<absl::Duration> wait = absl::Seconds(99);
  EXPECT_FALSE(s.SpareChanged(false, &wait));  // nothing changed
  EXPECT_EQ(wait, absl::Seconds(99));
}

TEST(CheckScheduleTest, ASpareIsCheckedEveryIntervalUntilARoundTakesIt) {
  CheckSchedule s(absl::Seconds(30));
  EXPECT_EQ(s.Checked(true), std::nullopt);  // the check before the join
  std::optional<absl::Duration> wait;
  ASSERT_TRUE(s.SpareChanged(true, &wait));  // the job: a spare
  EXPECT_EQ(wait, absl::Seconds(30));
  EXPECT_FALSE(s.SpareChanged(true, &wait));  // told again: the armed check stays
  EXPECT_EQ(s.Checked(true), absl::Seconds(30));
  EXPECT_EQ(s.Checked(true), absl::Seconds(30));
  ASSERT_TRUE(s.SpareChanged(false, &wait));  // a round took it in
  EXPECT_EQ(wait, std::nullopt);
  EXPECT_EQ(s.Checked(true), std::nullopt);  // its stop report's check arms nothing
}

TEST(CheckScheduleTest, ASpareThatFailsGoesOnTheBackoffAndComesBackOnThePass) {
  CheckSchedule s(absl::Seconds(30), HealthBackoff(absl::Seconds(1), absl::Seconds(4)));
  std::optional<absl::Duration> wait;
  s.Checked(true);
  ASSERT_TRUE(s.SpareChanged(true, &wait));
  EXPECT_EQ(s.Checked(false), absl::Seconds(1));  // the spare's check failed
  // The job keeps it out: no longer a spare, but the backoff's check stays armed.
  EXPECT_FALSE(s.SpareChanged(false, &wait));
  EXPECT_EQ(s.Checked(false), absl::Seconds(2));
  EXPECT_EQ(s.Checked(false), absl::Seconds(4));
  EXPECT_EQ(s.Checked(false), absl::Seconds(4));
  EXPECT_EQ(s.failures(), 4);
  // It passes: healthy, not yet a spare again (the job tells it so next): nothing armed.
  EXPECT_EQ(s.Checked(true), std::nullopt);
  EXPECT_EQ(s.failures(), 0);
  ASSERT_TRUE(s.SpareChanged(true, &wait));
  EXPECT_EQ(wait, absl::Seconds(30));
  EXPECT_EQ(s.Checked(false), absl::Seconds(1));  // a new failure starts the backoff over
}

TEST(CheckScheduleTest, AZeroIntervalChecksASpareOnlyBeforeItsJoin) {
  CheckSchedule s(absl::ZeroDuration());
  std::optional<absl::Duration> wait = absl::Seconds(1);
  s.Checked(true);
  ASSERT_TRUE(s.SpareChanged(true, &wait));
  EXPECT_EQ(wait, std::nullopt);
  EXPECT_EQ(s.Checked(true), std::nullopt);
  EXPECT_EQ(s.Checked(false), absl::Seconds(1));  // a node kept out still re-checks
}

}  // namespace
}  // namespace muster
