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

}  // namespace
}  // namespace muster
