#include "rendezvous/core/hang.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/core/job_harness.h"

namespace muster::rdzv {
namespace {

constexpr char kAllReduce[] =
    "all_reduce <- c10d_logger.py:81 wrapper <- train.py:57 step <- train.py:70 <module>";
constexpr char kSleep[] = "sleep <- train.py:12 step <- train.py:70 <module>";

RankStack R(int rank, const std::string& text) {
  return RankStack{.rank = rank, .local_rank = rank % 2, .pid = 100 + rank, .text = text};
}

NodeStacks Node(const std::string& id, std::vector<RankStack> ranks) {
  return NodeStacks{.node_id = id, .host = "host-" + id, .ranks = std::move(ranks)};
}

TEST(JudgeHangTest, NamesTheRankOutsideTheCollectiveTheOthersWaitIn) {
  HangVerdict v = JudgeHang({Node("1", {R(0, kAllReduce), R(1, kAllReduce)}),
                             Node("2", {R(2, kAllReduce), R(3, kSleep)})});
  EXPECT_EQ(v.line, std::string("rank 3 is not in the collective the others wait in: ") + kSleep);
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.local_rank, 1);
  EXPECT_EQ(v.pid, 103);
  EXPECT_EQ(v.node_id, "2");
  EXPECT_EQ(v.host, "host-2");
  EXPECT_EQ(v.groups, std::string("ranks 0-2: ") + kAllReduce + "\nrank 3: " + kSleep);
}

TEST(JudgeHangTest, ATieGoesToTheCollective) {
  // Two ranks: one in the collective, one elsewhere. The collective is where "the others"
  // wait, whichever rank is lower.
  HangVerdict v = JudgeHang({Node("1", {R(0, kSleep), R(1, kAllReduce)})});
  EXPECT_EQ(v.rank, 0);
  EXPECT_EQ(v.line, std::string("rank 0 is not in the collective the others wait in: ") + kSleep);
}

TEST(JudgeHangTest, SeveralCulpritsAreListedWithTheirStacks) {
  HangVerdict v = JudgeHang({Node("1", {R(0, kAllReduce), R(1, kAllReduce), R(2, kAllReduce)}),
                             Node("2", {R(3, kSleep), R(4, "read <- loader.py:9 next")})});
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.line, std::string("ranks 3-4 are not in the collective the others wait in: rank 3 "
                                "in ") +
                        kSleep + "; rank 4 in read <- loader.py:9 next");
}

TEST(JudgeHangTest, EveryRankInOneStackNamesThatStack) {
  HangVerdict v = JudgeHang({Node("1", {R(0, kSleep), R(1, kSleep)})});
  EXPECT_EQ(v.line, std::string("every rank waits in: ") + kSleep);
  EXPECT_EQ(v.rank, 0);
}

TEST(JudgeHangTest, ARankWithoutAStackIsOutsideTheOthers) {
  RankStack none{.rank = 1, .local_rank = 1, .pid = 7, .unavailable = "no stack hook"};
  HangVerdict v = JudgeHang({Node("1", {R(0, kAllReduce), none, R(2, kAllReduce)})});
  EXPECT_EQ(v.rank, 1);
  EXPECT_EQ(v.line,
            "rank 1 is not in the collective the others wait in: unavailable: no stack hook");
}

TEST(JudgeHangTest, NoRanksNoCulprit) {
  HangVerdict v = JudgeHang({});
  EXPECT_EQ(v.rank, -1);
  EXPECT_EQ(v.line, "no rank answered with a stack");
}

// The job's side: a hang is every participant stalled; one node still progressing is a
// slow job, not a hung one.
Stall Stalled(std::vector<RankStack> ranks, bool restartable = true) {
  return Stall{.stalled = true, .restartable = restartable, .ranks = std::move(ranks)};
}

JobSpec TwoNodes(int max_restarts) {
  return JobSpec{.run_id = "r", .min_nodes = 2, .max_nodes = 2, .max_restarts = max_restarts};
}

TEST(JobHangTest, EveryNodeStalledEndsTheRoundAsHungAndRestarts) {
  JobHarness h(TwoNodes(1));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  std::vector<Event> out;
  h.job().NodeStalled("1", 1, Stalled({R(0, kAllReduce), R(1, kAllReduce)}), h.now(), &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  h.job().NodeStalled("2", 1, Stalled({R(2, kAllReduce), R(3, kSleep)}), h.now(), &out);
  ASSERT_FALSE(out.empty());  // both stalled now
  EXPECT_EQ(h.job().phase(), Job::Phase::kStopping);
  const Event& stop = out[0];
  EXPECT_EQ(stop.kind, Event::Kind::kStopWorkers);
  ASSERT_TRUE(stop.failure.has_value());
  EXPECT_EQ(stop.failure->what, "hung");
  EXPECT_EQ(stop.failure->kind, FailureKind::kHung);
  EXPECT_EQ(stop.failure->rank, 3);
  EXPECT_EQ(stop.failure->code, 138);
  EXPECT_NE(stop.text.find("rank 3 is not in the collective the others wait in: sleep"),
            std::string::npos)
      << stop.text;
  const Condition* restarting = nullptr;
  for (const Condition& c : h.job().conditions()) {
    if (c.type == "Restarting") restarting = &c;
  }
  ASSERT_NE(restarting, nullptr);
  EXPECT_EQ(restarting->reason, "Hung");
  EXPECT_EQ(h.job().restarts_used(), 1);
}

TEST(JobHangTest, ANodeThatProgressesAgainIsNotStalled) {
  JobHarness h(TwoNodes(1));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  std::vector<Event> out;
  h.job().NodeStalled("1", 1, Stalled({R(0, kAllReduce), R(1, kAllReduce)}), h.now(), &out);
  h.job().NodeStalled("1", 1, Stall{.stalled = false}, h.now(), &out);
  h.job().NodeStalled("2", 1, Stalled({R(2, kAllReduce), R(3, kSleep)}), h.now(), &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  // A stale round's report counts for nothing.
  h.job().NodeStalled("1", 0, Stalled({R(0, kAllReduce), R(1, kAllReduce)}), h.now(), &out);
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
}

TEST(JobHangTest, ANodeWhoseWorkersAllExitedZeroCountsAsWaiting) {
  JobHarness h(TwoNodes(0));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  std::vector<Event> out;
  h.job().WorkersSucceeded("1", 1, h.now(), &out);
  h.job().NodeStalled("2", 1, Stalled({R(2, kAllReduce), R(3, kSleep)}), h.now(), &out);
  h.Advance(Job::kSettleWindow);  // a fatal verdict waits for it (settle_window.h)
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->root_cause->rank, 3);
  EXPECT_EQ(h.job().outcome()->exit_code, 138);  // restartable, budget 0: spent
}

TEST(JobHangTest, HangActionFailFinishesWithCodeOneAndTheCulpritAsRootCause) {
  JobHarness h(TwoNodes(3));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  std::vector<Event> out;
  h.job().NodeStalled("1", 1, Stalled({R(0, kAllReduce), R(1, kAllReduce)}, false), h.now(), &out);
  h.job().NodeStalled("2", 1, Stalled({R(2, kAllReduce), R(3, kSleep)}, false), h.now(), &out);
  h.Advance(Job::kSettleWindow);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  const Outcome& o = *h.job().outcome();
  EXPECT_EQ(o.exit_code, 1);
  ASSERT_TRUE(o.root_cause.has_value());
  EXPECT_EQ(o.root_cause->rank, 3);
  EXPECT_EQ(o.root_cause->message,
            std::string("rank 3 is not in the collective the others wait in: ") + kSleep);
  EXPECT_NE(o.root_cause->stderr_tail.find("ranks 0-2: "), std::string::npos);
  const Condition* failed = nullptr;
  for (const Condition& c : h.job().conditions()) {
    if (c.type == "Failed") failed = &c;
  }
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->reason, "Hung");
  // The culprit worker shows as failed, "hung".
  for (const WorkerStatus& w : h.job().Workers()) {
    if (w.rank == 3) {
      EXPECT_EQ(w.what, "hung");
      EXPECT_EQ(w.state, WorkerState::kFailed);
    }
  }
}

}  // namespace
}  // namespace muster::rdzv
