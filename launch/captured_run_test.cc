#include "launch/captured_run.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

SpawnSpec Shell(const char* script) {
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.env = {"PATH=/usr/bin:/bin"};
  return spec;
}

TEST(CapturedRunTest, ReturnsStdoutAndTheExitCode) {
  absl::StatusOr<CapturedRun> run = RunCaptured(Shell("echo 2.15.0; exit 3"), absl::Seconds(10));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->out, "2.15.0\n");
  EXPECT_EQ(run->exit_code, 3);
}

TEST(CapturedRunTest, AChildPastTheDeadlineIsKilled) {
  absl::Time t0 = absl::Now();
  // Closing stdout first: the deadline holds for the child's end too, not only for EOF.
  absl::StatusOr<CapturedRun> run =
      RunCaptured(Shell("exec >/dev/null; sleep 30"), absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(run.status())) << run.status();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  run = RunCaptured(Shell("sleep 30"), absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(run.status())) << run.status();
}

TEST(CapturedRunTest, AMissingProgramIsNotFound) {
  SpawnSpec spec;
  spec.argv = {"/nonexistent/python3", "-c", "1"};
  EXPECT_TRUE(absl::IsNotFound(RunCaptured(spec, absl::Seconds(5)).status()));
}

}  // namespace
}  // namespace muster
