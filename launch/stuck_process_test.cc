#include "launch/stuck_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(StuckProcessTest, ReadsStateAndWchanOfASleepingProcess) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  // Asleep in pause() within moments: state S, waiting in the kernel somewhere.
  StuckProcess p;
  for (absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;
       absl::SleepFor(absl::Milliseconds(10))) {
    p = DescribeStuckProcess(child);
    if (p.state == 'S') break;
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(p.pid, child);
  EXPECT_EQ(p.state, 'S');
  EXPECT_FALSE(p.wchan.empty());
  EXPECT_NE(p.wchan, "0");
  p.rank = 3;
  p.local_rank = 1;
  p.wchan = "percpu_rwsem_wait";
  p.state = 'D';
  EXPECT_EQ(StuckProcessLine(p), "rank 3 (local_rank 1, pid " + std::to_string(child) +
                                     "): state D (uninterruptible sleep), wchan percpu_rwsem_wait");
}

TEST(StuckProcessTest, AProcessGoneIsSaidToBe) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  StuckProcess p = DescribeStuckProcess(child);
  EXPECT_EQ(p.state, '?');
  EXPECT_EQ(StuckProcessLine(p),
            "pid " + std::to_string(child) + ": state ? (gone), wchan unknown");
}

}  // namespace
}  // namespace muster
