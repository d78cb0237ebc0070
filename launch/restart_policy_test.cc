#include "launch/restart_policy.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(RestartPolicyTest, Parse) {
  EXPECT_EQ(*ParseRestartPolicy("ExitCode"), RestartPolicy::kExitCode);
  EXPECT_EQ(*ParseRestartPolicy("onfailure"), RestartPolicy::kOnFailure);
  EXPECT_EQ(*ParseRestartPolicy("NEVER"), RestartPolicy::kNever);
  EXPECT_EQ(*ParseRestartPolicy("Always"), RestartPolicy::kAlways);
  absl::StatusOr<RestartPolicy> bad = ParseRestartPolicy("sometimes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("--restart-policy"), std::string::npos);
}

TEST(RestartPolicyTest, ExitCodePolicyFollowsSeeds000) {
  std::set<int> r = DefaultRestartableExitCodes();
  EXPECT_EQ(r, (std::set<int>{130, 137, 138, 143}));
  for (int code = 0; code < 256; ++code) {
    ExitVerdict v = ClassifyExit(RestartPolicy::kExitCode, r, code);
    if (code == 0) {
      EXPECT_EQ(v, ExitVerdict::kSucceeded);
    } else if (code == 130 || code == 137 || code == 138 || code == 143) {
      EXPECT_EQ(v, ExitVerdict::kRestartable) << code;
    } else {
      EXPECT_EQ(v, ExitVerdict::kFatal) << code;
    }
  }
}

TEST(RestartPolicyTest, OtherPolicies) {
  std::set<int> r = DefaultRestartableExitCodes();
  EXPECT_EQ(ClassifyExit(RestartPolicy::kNever, r, 137), ExitVerdict::kFatal);
  EXPECT_EQ(ClassifyExit(RestartPolicy::kNever, r, 0), ExitVerdict::kSucceeded);
  EXPECT_EQ(ClassifyExit(RestartPolicy::kOnFailure, r, 1), ExitVerdict::kRestartable);
  EXPECT_EQ(ClassifyExit(RestartPolicy::kAlways, r, 1), ExitVerdict::kRestartable);
  EXPECT_EQ(ClassifyExit(RestartPolicy::kAlways, r, 0), ExitVerdict::kSucceeded);
  EXPECT_TRUE(RestartsAfterSuccess(RestartPolicy::kAlways));
  EXPECT_FALSE(RestartsAfterSuccess(RestartPolicy::kOnFailure));
}

TEST(RestartPolicyTest, ExitCodeList) {
  EXPECT_EQ(*ParseExitCodeList("1, 2,3"), (std::set<int>{1, 2, 3}));
  EXPECT_FALSE(ParseExitCodeList("1,x").ok());
  EXPECT_FALSE(ParseExitCodeList("256").ok());
  EXPECT_FALSE(ParseExitCodeList("0").ok());
}

TEST(RestartPolicyTest, FatalExitCodeReadsAsNothingElse) {
  EXPECT_EQ(*ParseFatalExitCode("93"), 93);
  EXPECT_EQ(*ParseFatalExitCode(" 1 "), 1);
  EXPECT_EQ(*ParseFatalExitCode("125"), 125);
  for (const char* taken :
       {"0", "2", "126", "127", "128", "137", "138", "143", "255", "256", "-1", "x", ""}) {
    EXPECT_FALSE(ParseFatalExitCode(taken).ok()) << taken;
  }
  EXPECT_NE(ParseFatalExitCode("138").status().message().find("138: transient"), std::string::npos);
}

}  // namespace
}  // namespace muster
