// Hang detection's local parts: reading a worker tree's CPU time from /proc, and the
// threshold below which a worker made no progress.
#include "agent/diagnostics/hang_watch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>

#include "agent/diagnostics/process_cpu.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(ProcessCpuTest, CountsOwnAndReapedChildrensTime) {
  // comm "(a) b)" holds spaces and parentheses; fields after it: state ppid ... utime(14)
  // stime(15) cutime(16) cstime(17).
  const char* line =
      "4242 ((a) b)) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 1 0 100 0 0\n";
  std::optional<ProcStat> st = ParseProcStat(line);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->ppid, 17);
  EXPECT_EQ(TreeCpuOf(*st), absl::Seconds(310) / sysconf(_SC_CLK_TCK));
}

// A child that spins counts in its parent's tree; a sleeping one adds nothing.
TEST(ProcessCpuTest, ATreeCountsItsChildrensCpu) {
  pid_t spinner = fork();
  ASSERT_GE(spinner, 0);
  if (spinner == 0) {
    for (;;) {
    }
  }
  // The spinner's CPU time grows (on a loaded machine slowly): at least 50 ms within 20 s.
  std::map<pid_t, absl::Duration> cpu;
  for (int i = 0; i < 400; ++i) {
    cpu = ProcessTreeCpu({spinner, 999999999});
    if (cpu.count(spinner) && cpu[spinner] >= absl::Milliseconds(50)) break;
    timespec nap{0, 50 * 1000 * 1000};
    nanosleep(&nap, nullptr);
  }
  // The parent's tree (taken later, so not smaller) holds the child's time too.
  std::map<pid_t, absl::Duration> parent = ProcessTreeCpu({getpid()});
  kill(spinner, SIGKILL);
  waitpid(spinner, nullptr, 0);
  EXPECT_EQ(cpu.count(999999999), 0u);  // gone: left out
  ASSERT_EQ(cpu.count(spinner), 1u);
  EXPECT_GE(cpu[spinner], absl::Milliseconds(50));
  EXPECT_GE(parent[getpid()], cpu[spinner]);
}

TEST(HangWatchTest, ThresholdIsAboveADumpAndTheTickOfProc) {
  EXPECT_EQ(HangWatch::Threshold(absl::Milliseconds(750)), absl::Milliseconds(20));
  EXPECT_EQ(HangWatch::Threshold(absl::Seconds(75)), absl::Milliseconds(1875));
}

}  // namespace
}  // namespace muster
