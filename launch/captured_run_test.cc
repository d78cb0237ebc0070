#include "launch/captured_run.h"

#include <signal.h>
#include <unistd.h>

#include <vector>

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

TEST(CapturedRunTest, AKillingSignalIsDecoded) {
  absl::StatusOr<CapturedRun> run = RunCaptured(Shell("kill -TERM $$"), absl::Seconds(10));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 128 + SIGTERM);
}

TEST(AwaitHelpersTest, ManyChildrenShareOneDeadline) {
  std::vector<HelperChild> children;
  for (const char* script : {"echo fast", "echo slow; exec sleep 30", "echo err >&2; exit 4"}) {
    absl::StatusOr<HelperChild> child = StartHelper(Shell(script), HelperOutput::kStdoutAndStderr);
    ASSERT_TRUE(child.ok()) << child.status();
    children.push_back(std::move(*child));
  }
  absl::Time t0 = absl::Now();
  std::vector<HelperResult> r = AwaitHelpers(std::move(children), t0 + absl::Milliseconds(500));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].out, "fast\n");
  EXPECT_FALSE(r[0].timed_out);
  ASSERT_TRUE(r[0].exit.has_value());
  EXPECT_TRUE(r[0].exit->success());
  // Killed at the deadline: what it wrote before is kept, and how it ended is decoded.
  EXPECT_EQ(r[1].out, "slow\n");
  EXPECT_TRUE(r[1].timed_out);
  EXPECT_FALSE(r[1].output_ended);
  ASSERT_TRUE(r[1].exit.has_value());
  EXPECT_EQ(r[1].exit->signal, SIGKILL);
  EXPECT_EQ(r[2].out, "err\n");
  ASSERT_TRUE(r[2].exit.has_value());
  EXPECT_EQ(r[2].exit->code(), 4);
  for (const HelperResult& one : r) EXPECT_TRUE(one.reaped);
}

TEST(AwaitHelpersTest, OutputIsCutAtTheLimit) {
  absl::StatusOr<HelperChild> child = StartHelper(Shell("echo 0123456789; exit 0"));
  ASSERT_TRUE(child.ok()) << child.status();
  std::vector<HelperChild> one;
  one.push_back(std::move(*child));
  std::vector<HelperResult> r =
      AwaitHelpers(std::move(one), absl::Now() + absl::Seconds(10), AwaitOptions{.max_output = 4});
  EXPECT_EQ(r[0].out, "0123");
  EXPECT_TRUE(r[0].output_ended);
  EXPECT_TRUE(r[0].reaped);
}

TEST(ForkHelperTest, RunsTheFunctionAndReportsItsEnd) {
  absl::StatusOr<HelperChild> child = ForkHelper([](int out) {
    const char kLine[] = "S stage\n";
    if (write(out, kLine, sizeof kLine - 1) != sizeof kLine - 1) return 2;
    return 5;
  });
  ASSERT_TRUE(child.ok()) << child.status();
  std::vector<HelperChild> one;
  one.push_back(std::move(*child));
  std::vector<HelperResult> r = AwaitHelpers(std::move(one), absl::Now() + absl::Seconds(10));
  EXPECT_EQ(r[0].out, "S stage\n");
  ASSERT_TRUE(r[0].exit.has_value());
  EXPECT_EQ(r[0].exit->code(), 5);
}

TEST(ForkHelperTest, ACrashIsDecodedAndAHangIsKilledAtTheDeadline) {
  absl::StatusOr<HelperChild> crash = ForkHelper([](int) {
    // The kernel's own SIGSEGV death, not ASan's handler (which reports and exits 1).
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
    return 0;
  });
  absl::StatusOr<HelperChild> hang = ForkHelper([](int) {
    pause();
    return 0;
  });
  ASSERT_TRUE(crash.ok() && hang.ok());
  std::vector<HelperChild> two;
  two.push_back(std::move(*crash));
  two.push_back(std::move(*hang));
  std::vector<HelperResult> r = AwaitHelpers(std::move(two), absl::Now() + absl::Milliseconds(300));
  ASSERT_TRUE(r[0].exit.has_value());
  EXPECT_EQ(r[0].exit->signal, SIGSEGV);
  EXPECT_FALSE(r[0].timed_out);
  EXPECT_TRUE(r[1].timed_out);
  ASSERT_TRUE(r[1].exit.has_value());
  EXPECT_EQ(r[1].exit->signal, SIGKILL);
}

}  // namespace
}  // namespace muster
