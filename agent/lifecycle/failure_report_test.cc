#include "agent/lifecycle/failure_report.h"

#include <string>

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(FailureReportTest, StderrTravelsOnlyWithoutAnErrorFileMessage) {
  WorkerExit e{.placement = {.local_rank = 1, .rank = 5},
               .pid = 42,
               .code = 1,
               .what = "exit 1",
               .stderr_tail = "Traceback (most recent call last):\nValueError: boom"};
  rdzv::NodeInfo node{.node_id = "n:1", .host = "node-0"};
  rdzv::Failure f = FailureOf(e, node, false);
  EXPECT_EQ(f.message, "");
  EXPECT_EQ(f.stderr_tail, e.stderr_tail);
  EXPECT_EQ(FailedWorkerLine(f),
            "rank 5 (local_rank 1, pid 42, host node-0) failed: exit 1: ValueError: boom");
  e.error = WorkerError{.message = "RuntimeError: from the error file"};
  f = FailureOf(e, node, false);
  EXPECT_EQ(f.stderr_tail, "");
  EXPECT_EQ(FailedWorkerLine(f),
            "rank 5 (local_rank 1, pid 42, host node-0) failed: exit 1: RuntimeError: from the "
            "error file");
}

TEST(FailureReportTest, StderrBlockNamesTheRankAndIndentsEachLine) {
  EXPECT_EQ(StderrBlock(3, "h", ""), "");
  EXPECT_EQ(StderrBlock(3, "h", "a\nb"), "last lines of rank 3's stderr (host h):\n  a\n  b");
  EXPECT_EQ(StderrBlock(3, "h", "ranks 0-2: x\nrank 3: y", /*hung=*/true),
            "every rank by stack when the job hung:\n  ranks 0-2: x\n  rank 3: y");
}

TEST(FailureReportTest, TerminationLogKeepsTheSummaryAndTheLastLinesThatFit) {
  EXPECT_EQ(TerminationLogText("job failed: x", ""), "job failed: x");
  std::string tail;
  for (int i = 0; i < 20; ++i) tail += std::string(i ? "\n" : "") + std::string(299, 'a' + i);
  std::string text = TerminationLogText("job failed: x", StderrBlock(0, "h", tail));
  EXPECT_LE(text.size() + 1, kTerminationLogBytes);  // with WriteTerminationLog's newline
  EXPECT_EQ(text.find("job failed: x\nlast lines of rank 0's stderr (host h):\n  "), 0u) << text;
  // The last line is whole; the first ones were left out.
  EXPECT_EQ(text.substr(text.size() - 302), "\n  " + std::string(299, 'a' + 19));
  EXPECT_EQ(text.find(std::string(299, 'a')), std::string::npos);
}

TEST(FailureReportTest, AnOverlongSummaryIsCutAndLeavesNoRoomForTheBlock) {
  std::string summary(5000, 's');
  std::string text = TerminationLogText(summary, StderrBlock(0, "h", "line"));
  EXPECT_EQ(text.size(), kTerminationLogBytes - 1);
  EXPECT_EQ(text.substr(text.size() - 4), "s...");
}

TEST(FailureReportTest, FatalExitCodeOnlyForAWorkersPermanentFailure) {
  const auto outcome = [](rdzv::FailureKind kind, int code) {
    return rdzv::Outcome{.exit_code = code, .root_cause = rdzv::Failure{.kind = kind}};
  };
  // Without the flag, the root cause's code.
  EXPECT_EQ(FailedJobExitCode(outcome(rdzv::FailureKind::kWorker, 137), std::nullopt), 137);
  // A worker's or a hang's failure that ended the job: the flag's code.
  EXPECT_EQ(FailedJobExitCode(outcome(rdzv::FailureKind::kWorker, 137), 93), 93);
  EXPECT_EQ(FailedJobExitCode(outcome(rdzv::FailureKind::kHung, 1), 93), 93);
  // Transient ends keep theirs: lost nodes, a preemption, a rendezvous timeout (no cause).
  EXPECT_EQ(FailedJobExitCode(outcome(rdzv::FailureKind::kNodeLost, 138), 93), 138);
  EXPECT_EQ(FailedJobExitCode(outcome(rdzv::FailureKind::kPreempted, 143), 93), 143);
  EXPECT_EQ(FailedJobExitCode(rdzv::Outcome{.exit_code = 138}, 93), 138);
}
}  // namespace
}  // namespace muster
