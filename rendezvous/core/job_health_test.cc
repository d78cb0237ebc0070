// Job::NodeHealth and a Join that carries an exclusion (job.cc): a node its health
// gate keeps out counts toward no round, is listed as Excluded with its reason, and
// arrives as a joiner once healthy.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/core/job.h"
#include "rendezvous/core/job_harness.h"
#include "rendezvous/core/job_status.h"

namespace muster::rdzv {
namespace {

const NodeStatus* StatusOfNode(const JobStatusSnapshot& s, const std::string& id) {
  for (const NodeStatus& n : s.nodes) {
    if (n.node_id == id) return &n;
  }
  return nullptr;
}

TEST(JobHealthTest, AnExcludedJoinerCountsTowardNoRoundUntilHealthy) {
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2", -1, 2, 0, "--health-check exited 1").ok());
  EXPECT_EQ(h.job().phase(), Job::Phase::kGathering);  // 2 joined, 1 may take part
  auto told = h.Last("2", Event::Kind::kProgress);
  ASSERT_TRUE(told.has_value());
  EXPECT_NE(told->text.find("--health-check exited 1"), std::string::npos) << told->text;
  JobStatusSnapshot s = JobStatusOf(h.job());
  ASSERT_NE(StatusOfNode(s, "2"), nullptr);
  EXPECT_EQ(StatusOfNode(s, "2")->state, NodeState::kExcluded);
  EXPECT_EQ(StatusOfNode(s, "2")->excluded, "--health-check exited 1");
  EXPECT_EQ(StatusOfNode(s, "1")->state, NodeState::kWaiting);
  h.Advance(absl::Seconds(60));  // no last call: one eligible node of a minimum of 2
  EXPECT_EQ(h.job().phase(), Job::Phase::kGathering);

  h.Health("2", "");
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants().size(), 2u);
  EXPECT_TRUE(h.Last("2", Event::Kind::kRoundStarted).has_value());
  EXPECT_EQ(StatusOfNode(JobStatusOf(h.job()), "2")->state, NodeState::kRunning);
}

TEST(JobHealthTest, AnExcludedNodeTimesTheGatheringOutNamingItsReason) {
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2", -1, 2, 0, "no space left").ok());
  h.Advance(h.spec().join_timeout);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_NE(h.job().outcome()->reason.find("host-2 excluded: no space left"), std::string::npos)
      << h.job().outcome()->reason;
}

TEST(JobHealthTest, ASickNodeSitsOutTheNextRoundOfAnElasticJobAndRejoinsWhenHealthy) {
  JobHarness h(Spec(1, 2, /*restarts=*/3));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  h.Fail("2", 1, /*restartable=*/true);
  ASSERT_EQ(h.job().phase(), Job::Phase::kStopping);
  // The gate speaks before the stop report: the next round forms without it.
  h.Health("2", "gpu 1 held by pid 77");
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  ASSERT_EQ(h.job().participants().size(), 1u);
  EXPECT_EQ(h.job().participants()[0].node_id, "1");
  EXPECT_EQ(StatusOfNode(JobStatusOf(h.job()), "2")->state, NodeState::kExcluded);
  h.Take("1");
  const int restarts = h.job().restarts_used();

  h.Health("2", "gpu 1 held by pid 77");  // the same verdict again changes nothing
  EXPECT_FALSE(h.Last("1", Event::Kind::kStopWorkers).has_value());
  h.Health("2", "");  // healthy: re-forms with it, uncounted
  EXPECT_TRUE(h.Last("1", Event::Kind::kStopWorkers).has_value());
  EXPECT_EQ(h.job().history().back().reason.find("node host-2 passed its health gate"), 0u)
      << h.job().history().back().reason;
  EXPECT_FALSE(h.job().history().back().counted);
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants().size(), 2u);
  EXPECT_EQ(h.job().restarts_used(), restarts);
}

TEST(JobHealthTest, AnElasticJobBelowItsMinimumGathersAgainUntilTheNodeRecovers) {
  JobHarness h(Spec(2, 2, /*restarts=*/3));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  h.Fail("1", 1, /*restartable=*/true);
  h.Health("1", "disk full");
  h.StopAll();
  EXPECT_EQ(h.job().phase(), Job::Phase::kGathering);
  h.Advance(absl::Seconds(120));
  EXPECT_EQ(h.job().phase(), Job::Phase::kGathering);
  h.Health("1", "");
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants().size(), 2u);
}

TEST(JobHealthTest, AnExcludedNodeThatLeavesIsForgotten) {
  JobHarness h(Spec(1, 2));
  ASSERT_TRUE(h.Join("1", -1, 2, 0, "sick").ok());
  std::vector<Event> ignored;
  h.job().NodeLost("1", "stream ended", h.now(), &ignored);
  ASSERT_TRUE(h.Join("2").ok());
  h.Advance(absl::Seconds(30));
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants().size(), 1u);
  h.Health("1", "");  // unknown now: ignored
  EXPECT_EQ(h.job().participants().size(), 1u);
}

}  // namespace
}  // namespace muster::rdzv
