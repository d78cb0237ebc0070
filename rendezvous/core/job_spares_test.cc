// Spares (job.h, docs/guides/spares.md): a healthy node that a full round has no place for is
// listed as Spare and takes the place of a participant that is lost or excluded in the next
// round, so a fixed-size job keeps its WORLD_SIZE; with spec.spares set, one node more is
// refused at its join.
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/core/job.h"
#include "rendezvous/core/job_harness.h"
#include "rendezvous/core/job_status.h"

namespace muster::rdzv {
namespace {

NodeState SpareTestState(const Job& job, const std::string& id) {
  for (const NodeStatus& n : JobStatusOf(job).nodes) {
    if (n.node_id == id) return n.state;
  }
  ADD_FAILURE() << "node " << id << " not listed";
  return NodeState::kLeft;
}

JobSpec SpareSpec(int nodes, int spares, int restarts = 0) {
  JobSpec s = Spec(nodes, nodes, restarts);
  s.spares = spares;
  return s;
}

TEST(JobSparesTest, TheLastJoinerBeyondNIsASpareThatHoldsNoRank) {
  JobHarness h(SpareSpec(2, 1));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_TRUE(h.Join("3").ok());
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  ASSERT_EQ(h.job().participants().size(), 2u);
  EXPECT_EQ(h.job().participants()[0].node_id, "1");
  EXPECT_EQ(h.job().participants()[1].node_id, "2");
  EXPECT_EQ(SpareTestState(h.job(), "3"), NodeState::kSpare);
  std::vector<Event> heard = h.Take("3");
  ASSERT_FALSE(heard.empty());
  for (const Event& e : heard) EXPECT_NE(e.kind, Event::Kind::kRoundStarted);
  EXPECT_EQ(heard.back().kind, Event::Kind::kProgress);
  EXPECT_TRUE(heard.back().spare);
  EXPECT_EQ(heard.back().text.find("spare: round 1 runs with its maximum of 2 nodes"), 0u)
      << heard.back().text;
  // Arriving while the round ran: the same.
  JobHarness late(SpareSpec(2, 0));
  ASSERT_TRUE(late.Join("1").ok());
  ASSERT_TRUE(late.Join("2").ok());
  ASSERT_TRUE(late.Join("3").ok());
  EXPECT_EQ(SpareTestState(late.job(), "3"), NodeState::kSpare);
  std::optional<Event> told = late.Last("3", Event::Kind::kProgress);
  ASSERT_TRUE(told.has_value());
  EXPECT_EQ(told->text.find("spare: "), 0u);
  EXPECT_TRUE(told->spare);
}

TEST(JobSparesTest, ALostNodeIsReplacedByTheSpareUncountedWithWorldSizeUnchanged) {
  JobHarness h(SpareSpec(2, 1, /*restarts=*/0));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_TRUE(h.Join("3").ok());
  const int world_size = h.Last("1", Event::Kind::kRoundStarted)->assignment.world_size;
  std::vector<Event> out;
  h.job().NodeLost("1", "stream ended", h.now(), &out);
  ASSERT_EQ(h.job().phase(), Job::Phase::kStopping);
  EXPECT_NE(h.job().history().back().reason.find("spare host-3 takes its place"), std::string::npos)
      << h.job().history().back().reason;
  EXPECT_FALSE(h.job().history().back().counted);
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  ASSERT_EQ(h.job().participants().size(), 2u);
  // Survivors keep their order; the spare comes last (rank_order.h).
  EXPECT_EQ(h.job().participants()[0].node_id, "2");
  EXPECT_EQ(h.job().participants()[1].node_id, "3");
  auto started = h.Last("3", Event::Kind::kRoundStarted);
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->assignment.world_size, world_size);
  EXPECT_EQ(started->assignment.group_rank, 1);
  EXPECT_EQ(h.job().restarts_used(), 0);  // --max-restarts 0 and still running
  EXPECT_EQ(SpareTestState(h.job(), "3"), NodeState::kRunning);
}

TEST(JobSparesTest, WithoutASpareAFixedSizeJobEndsOnALoss) {
  JobHarness h(SpareSpec(2, 1));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  std::vector<Event> out;
  h.job().NodeLost("1", "stream ended", h.now(), &out);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->exit_code, 138);
}

TEST(JobSparesTest, AnExcludedParticipantIsReplacedByTheSpare) {
  JobHarness h(SpareSpec(2, 1, /*restarts=*/1));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_TRUE(h.Join("3").ok());
  h.Fail("2", 1, /*restartable=*/true);  // counts against --max-restarts, as any failure
  ASSERT_EQ(h.job().phase(), Job::Phase::kStopping);
  h.Health("2", "gpu 1 held by pid 77");  // its gate speaks before its stop report
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  ASSERT_EQ(h.job().participants().size(), 2u);
  EXPECT_EQ(h.job().participants()[0].node_id, "1");
  EXPECT_EQ(h.job().participants()[1].node_id, "3");
  EXPECT_EQ(h.job().restarts_used(), 1);  // the failure's restart only: the swap-in is free
  EXPECT_EQ(SpareTestState(h.job(), "2"), NodeState::kExcluded);
  // Healthy again: a spare now, the round is full and goes on.
  h.Take("1");
  h.Health("2", "");
  EXPECT_FALSE(h.Last("1", Event::Kind::kStopWorkers).has_value());
  EXPECT_EQ(SpareTestState(h.job(), "2"), NodeState::kSpare);
}

TEST(JobSparesTest, ASpareSickWhileWaitingIsNotSwappedIn) {
  JobHarness h(SpareSpec(2, 1));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_TRUE(h.Join("3").ok());
  h.Health("3", "disk full");
  EXPECT_EQ(SpareTestState(h.job(), "3"), NodeState::kExcluded);
  std::vector<Event> out;
  h.job().NodeLost("1", "stream ended", h.now(), &out);
  EXPECT_EQ(h.job().history().back().reason.find("spare"), std::string::npos);
  h.StopAll();
  // No healthy spare: a fixed-size job gathers until one recovers or the join timeout.
  ASSERT_EQ(h.job().phase(), Job::Phase::kGathering);
  h.Health("3", "");
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants()[1].node_id, "3");
}

TEST(JobSparesTest, OneNodeMoreThanNPlusSparesIsRefused) {
  JobHarness h(SpareSpec(2, 1));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_TRUE(h.Join("3").ok());
  absl::Status st = h.Join("4");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("--spares"), std::string::npos) << st.message();
  EXPECT_TRUE(h.Join("3").ok());  // a node already in may join again
  // A different --spares is refused as any differing spec.
  JobSpec other = SpareSpec(2, 2);
  NodeInfo n{.node_id = "5", .host = "host-5", .address = "10.0.0.5"};
  std::vector<Event> out;
  absl::Status differs = h.job().Join(n, other, h.now(), &out);
  EXPECT_EQ(differs.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(differs.message().find("--spares 2"), std::string::npos) << differs.message();
}

TEST(JobSparesTest, AnElasticJobKeepsNodesBeyondItsMaximumAsSpares) {
  JobHarness h(Spec(1, 2));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_TRUE(h.Join("3").ok());
  EXPECT_EQ(SpareTestState(h.job(), "3"), NodeState::kSpare);
  std::vector<Event> out;
  h.job().NodeLost("2", "stream ended", h.now(), &out);
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants().size(), 2u);  // not shrunk: the spare came in
}

}  // namespace
}  // namespace muster::rdzv
