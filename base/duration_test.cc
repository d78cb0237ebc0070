#include "base/duration.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(DurationTest, HumanDurationIsRoundedForPeople) {
  EXPECT_EQ(HumanDuration(absl::Seconds(30)), "30s");
  EXPECT_EQ(HumanDuration(absl::Milliseconds(1500)), "1.5s");
  EXPECT_EQ(HumanDuration(absl::Microseconds(3003090)), "3s");
  EXPECT_EQ(HumanDuration(absl::Milliseconds(1260)), "1.3s");
  EXPECT_EQ(HumanDuration(absl::Milliseconds(90400)), "90s");
  EXPECT_EQ(HumanDuration(absl::Microseconds(250400)), "250ms");
  EXPECT_EQ(HumanDuration(absl::ZeroDuration()), "0s");
}

TEST(DurationTest, ParseAcceptsUnitsAndBareSeconds) {
  EXPECT_EQ(*ParseDuration("30"), absl::Seconds(30));
  EXPECT_EQ(*ParseDuration("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDuration("1.5s"), absl::Milliseconds(1500));
  EXPECT_FALSE(ParseDuration("-1s").ok());
  EXPECT_FALSE(ParseDuration("soon").ok());
}

}  // namespace
}  // namespace muster
