#include "launch/reaper.h"

#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(ReaperTest, ReapsEveryExitedChildOnce) {
  std::map<pid_t, int> expected;
  for (int code : {3, 4, 5}) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(code);
    expected[pid] = code;
  }
  // Wait until all three have exited, without reaping them: the reaper must find them.
  for (const auto& [pid, code] : expected) {
    siginfo_t info{};
    ASSERT_EQ(waitid(P_PID, pid, &info, WEXITED | WNOWAIT), 0);
  }
  std::map<pid_t, int> reaped;
  int n = ReapExitedChildren([&](pid_t pid, int wstatus) {
    // Other tests in this binary may leave exited helpers (a disarmed watchdog) behind.
    if (!expected.count(pid)) return;
    ASSERT_TRUE(WIFEXITED(wstatus));
    reaped[pid] = WEXITSTATUS(wstatus);
  });
  EXPECT_GE(n, 3);
  EXPECT_EQ(reaped, expected);
  ReapExitedChildren([&](pid_t pid, int) { EXPECT_FALSE(expected.count(pid)) << "reaped twice"; });
}

TEST(ReaperTest, RunningChildrenAreLeftAlone) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pause();
    _exit(0);
  }
  EXPECT_EQ(ReapExitedChildren([](pid_t, int) { FAIL() << "a running child was reaped"; }), 0);
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
}

}  // namespace
}  // namespace muster
