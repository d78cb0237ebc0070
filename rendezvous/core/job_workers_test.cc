// Job's record of nodes and workers for the status (job_workers.cc).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/core/job.h"
#include "rendezvous/core/job_harness.h"

namespace muster::rdzv {
namespace {

TEST(JobWorkersTest, WorkersShowRanksPidsAndHowTheyEnded) {
  JobHarness h(Spec(2, 2, 1));
  ASSERT_TRUE(h.Join("1", -1, 2).ok());
  ASSERT_TRUE(h.Join("2", -1, 2).ok());
  std::vector<WorkerStatus> w = h.job().Workers();
  ASSERT_EQ(w.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(w[r].rank, r);
    EXPECT_EQ(w[r].local_rank, r % 2);
    EXPECT_EQ(w[r].group_rank, r / 2);
    EXPECT_EQ(w[r].node_id, r < 2 ? "1" : "2");
    EXPECT_EQ(w[r].state, WorkerState::kPending);
    EXPECT_EQ(w[r].pid, 0);
    EXPECT_EQ(w[r].restarts, 0);
  }
  h.job().WorkersStarted("1", 1,
                         {{.local_rank = 0, .rank = 0, .pid = 101, .start = "warm"},
                          {.local_rank = 1,
                           .rank = 1,
                           .pid = 102,
                           .start = "exec",
                           .fallback = "the template runs 2 Python threads"}},
                         h.now());
  h.job().WorkersStarted("2", 1,
                         {{.local_rank = 0, .rank = 2, .pid = 201},
                          {.local_rank = 1, .rank = 3, .pid = 202},
                          {.local_rank = 5, .rank = 7, .pid = 999}},
                         h.now());
  h.job().WorkersStarted("2", 7, {{.local_rank = 0, .rank = 2, .pid = 666}},
                         h.now());  // stale round: ignored
  w = h.job().Workers();
  ASSERT_EQ(w.size(), 4u);  // local rank 5 does not exist: ignored
  EXPECT_EQ(w[0].pid, 101);
  EXPECT_EQ(w[3].pid, 202);
  EXPECT_EQ(w[2].pid, 201);
  for (const WorkerStatus& x : w) EXPECT_EQ(x.state, WorkerState::kRunning);
  // How each was started, as its agent said (docs/guides/warm-start.md); "" when it did not.
  EXPECT_EQ(w[0].start, "warm");
  EXPECT_EQ(w[0].fallback, "");
  EXPECT_EQ(w[1].start, "exec");
  EXPECT_EQ(w[1].fallback, "the template runs 2 Python threads");
  EXPECT_EQ(w[2].start, "");

  // Rank 3 is killed; then its agent's decision report arrives (it must not overwrite).
  h.job().WorkerEnded("2", 1,
                      EndedWorker{.local_rank = 1,
                                  .pid = 202,
                                  .code = 137,
                                  .signal = 9,
                                  .what = "signal 9 (SIGKILL)",
                                  .stopped = false},
                      h.now());
  h.Fail("2", 137, true);
  // Its sibling and the other node's workers are stopped.
  h.job().WorkerEnded("2", 1,
                      EndedWorker{.local_rank = 0,
                                  .pid = 201,
                                  .code = 143,
                                  .signal = 15,
                                  .what = "signal 15 (SIGTERM)",
                                  .stopped = true},
                      h.now());
  h.job().WorkerEnded("1", 1,
                      EndedWorker{.local_rank = 0,
                                  .pid = 101,
                                  .code = 143,
                                  .signal = 15,
                                  .what = "signal 15 (SIGTERM)",
                                  .stopped = true},
                      h.now());
  w = h.job().Workers();
  EXPECT_EQ(w[3].state, WorkerState::kFailed);
  EXPECT_EQ(w[3].pid, 202);
  EXPECT_EQ(w[3].code, 137);
  EXPECT_EQ(w[3].signal, 9);
  EXPECT_EQ(w[2].state, WorkerState::kStopped);
  EXPECT_EQ(w[0].state, WorkerState::kStopped);
  EXPECT_EQ(w[1].state, WorkerState::kRunning);
  std::vector<Job::NodeView> nodes = h.job().NodeViews();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].state, NodeState::kStopping);
  EXPECT_EQ(nodes[1].state, NodeState::kFailed);
  // Node 1 says its workers are stopped, without a report for local rank 1: no worker of a
  // stopped node is left Running.
  std::vector<Event> out;
  h.job().WorkersStopped("1", 1, 1100, h.now(), &out);
  EXPECT_EQ(h.job().Workers()[1].state, WorkerState::kStopped);
}

TEST(JobWorkersTest, AFinishedJobLeavesNoWorkerRunningAndNoRecordOfARestartNotMade) {
  JobHarness h(Spec(2, 2, 0));
  ASSERT_TRUE(h.Join("1", -1, 2).ok());
  ASSERT_TRUE(h.Join("2", -1, 2).ok());
  h.job().WorkersStarted("1", 1,
                         {{.local_rank = 0, .rank = 0, .pid = 101, .start = "warm"},
                          {.local_rank = 1,
                           .rank = 1,
                           .pid = 102,
                           .start = "exec",
                           .fallback = "the template runs 2 Python threads"}},
                         h.now());
  h.job().WorkersStarted("2", 1, {{.local_rank = 0, .rank = 2, .pid = 201}}, h.now());
  h.Fail("2", 137, true);  // local rank 1 (rank 3): restartable, but the budget is 0
  h.Advance(Job::kSettleWindow);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  std::vector<WorkerStatus> w = h.job().Workers();
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[3].state, WorkerState::kFailed);
  for (int r : {0, 1, 2}) {
    EXPECT_EQ(w[r].state, WorkerState::kStopped) << "rank " << r;
    EXPECT_EQ(w[r].what, "stopped: the job ended");
  }
  EXPECT_EQ(w[0].pid, 101);
  EXPECT_TRUE(h.job().history().empty());  // no restart happened
  // The agent's report, arriving after the outcome, says how the worker really ended.
  h.job().WorkerEnded("1", 1,
                      EndedWorker{.local_rank = 0,
                                  .pid = 101,
                                  .code = 143,
                                  .signal = 15,
                                  .what = "signal 15 (SIGTERM)",
                                  .stopped = true},
                      h.now());
  w = h.job().Workers();
  EXPECT_EQ(w[0].state, WorkerState::kStopped);
  EXPECT_EQ(w[0].signal, 15);
  EXPECT_EQ(w[0].what, "signal 15 (SIGTERM)");
}

TEST(JobWorkersTest, ARestartedRoundStartsPendingAndTheFinalStatusKeepsWhoLeft) {
  JobHarness h(Spec(2, 2, 1));
  ASSERT_TRUE(h.Join("1", -1, 2).ok());
  ASSERT_TRUE(h.Join("2", -1, 2).ok());
  h.Fail("2", 137, true);
  h.StopAll();  // round 2: every worker is pending again, restarted once
  std::vector<WorkerStatus> w = h.job().Workers();
  ASSERT_EQ(w.size(), 4u);
  for (const WorkerStatus& x : w) {
    EXPECT_EQ(x.state, WorkerState::kPending);
    EXPECT_EQ(x.pid, 0);
    EXPECT_EQ(x.restarts, 1);
  }
  h.job().WorkersStarted(
      "1", 2, {{.local_rank = 0, .rank = 0, .pid = 111}, {.local_rank = 1, .rank = 1, .pid = 112}},
      h.now());
  h.job().WorkersStarted(
      "2", 2, {{.local_rank = 0, .rank = 2, .pid = 211}, {.local_rank = 1, .rank = 3, .pid = 212}},
      h.now());
  std::vector<Event> out;
  h.job().WorkersSucceeded("1", 2, h.now(), &out);
  h.job().WorkersSucceeded("2", 2, h.now(), &out);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  // Agents hang up after the outcome; the final status still lists them and their workers.
  h.job().NodeLost("1", "stream closed", h.now(), &out);
  h.job().NodeLost("2", "stream closed", h.now(), &out);
  h.job().Heartbeat("1", h.now());  // a late message from a node that left: harmless
  EXPECT_TRUE(h.job().Nodes().empty());
  std::vector<Job::NodeView> nodes = h.job().NodeViews();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].state, NodeState::kLeft);
  EXPECT_EQ(nodes[1].group_rank, 1);
  w = h.job().Workers();
  ASSERT_EQ(w.size(), 4u);
  for (const WorkerStatus& x : w) {
    EXPECT_EQ(x.state, WorkerState::kSucceeded);
    EXPECT_EQ(x.code, 0);
  }
  EXPECT_EQ(w[1].pid, 112);
}

TEST(JobWorkersTest, NodeViewsListParticipantsByGroupRankThenWaitingNodes) {
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("2", 1).ok());
  ASSERT_TRUE(h.Join("1", 0).ok());
  ASSERT_TRUE(h.Join("3").ok());  // the round runs at its maximum: a spare (job.h)
  std::vector<Job::NodeView> nodes = h.job().NodeViews();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].info.node_id, "1");
  EXPECT_EQ(nodes[0].group_rank, 0);
  EXPECT_EQ(nodes[0].state, NodeState::kRunning);
  EXPECT_EQ(nodes[1].info.node_id, "2");
  EXPECT_EQ(nodes[2].info.node_id, "3");
  EXPECT_EQ(nodes[2].group_rank, -1);
  EXPECT_EQ(nodes[2].state, NodeState::kSpare);
  EXPECT_EQ(h.job().Workers().size(), 4u);  // the spare has none
}

}  // namespace
}  // namespace muster::rdzv
