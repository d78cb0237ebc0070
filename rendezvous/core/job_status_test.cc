#include "rendezvous/core/job_status.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

NodeInfo Node(const std::string& id, int hint) {
  return NodeInfo{.node_id = id,
                  .host = "host-" + id,
                  .address = "10.0.0." + id,
                  .rank_hint = hint,
                  .local_world_size = 2,
                  .store_port = 1000,
                  .probe = "probe-" + id};
}

JobSpec Spec() {
  return JobSpec{.run_id = "job", .min_nodes = 2, .max_nodes = 2, .max_restarts = 1};
}

TEST(JobStatusTest, PhaseFollowsTheJobFromPendingToFailed) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Job job(Spec(), t0);
  std::vector<Event> out;
  EXPECT_EQ(PhaseOf(job), JobPhase::kPending);
  ASSERT_TRUE(job.Join(Node("1", 0), Spec(), t0, &out).ok());
  ASSERT_TRUE(job.Join(Node("2", 1), Spec(), t0, &out).ok());
  EXPECT_EQ(PhaseOf(job), JobPhase::kRunning);
  Failure restartable{.node_id = "1",
                      .host = "host-1",
                      .code = 137,
                      .what = "signal 9",
                      .message = "",
                      .restartable = true};
  job.WorkerFailed("1", 1, restartable, t0, &out);
  EXPECT_EQ(PhaseOf(job), JobPhase::kRestarting);
  job.NodeLost("2", "stream closed", t0, &out);  // below the minimum: 138
  EXPECT_EQ(PhaseOf(job), JobPhase::kFailed);
  EXPECT_STREQ(JobPhaseName(PhaseOf(job)), "Failed");
}

TEST(JobStatusTest, SnapshotCopiesTheJobWithNodesByGroupRank) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Job job(Spec(), t0);
  std::vector<Event> out;
  ASSERT_TRUE(job.Join(Node("2", 1), Spec(), t0, &out).ok());
  ASSERT_TRUE(job.Join(Node("1", 0), Spec(), t0 + absl::Seconds(1), &out).ok());
  job.Heartbeat("2", t0 + absl::Seconds(5));
  JobStatusSnapshot s = JobStatusOf(job);
  EXPECT_EQ(s.run_id, "job");
  EXPECT_EQ(s.phase, JobPhase::kRunning);
  EXPECT_EQ(s.round, 1);
  EXPECT_EQ(s.max_restarts, 1);
  EXPECT_EQ(s.min_nodes, 2);
  ASSERT_EQ(s.nodes.size(), 2u);
  EXPECT_EQ(s.nodes[0].node_id, "1");
  EXPECT_EQ(s.nodes[0].group_rank, 0);
  EXPECT_EQ(s.nodes[0].state, NodeState::kRunning);
  EXPECT_EQ(s.nodes[0].probe, "probe-1");
  EXPECT_EQ(s.nodes[0].last_heartbeat, t0 + absl::Seconds(1));
  EXPECT_EQ(s.nodes[1].address, "10.0.0.2");
  EXPECT_EQ(s.nodes[1].local_world_size, 2);
  EXPECT_EQ(s.nodes[1].last_heartbeat, t0 + absl::Seconds(5));
  EXPECT_EQ(s.participants.size(), 2u);
  EXPECT_EQ(s.workers.size(), 4u);
  EXPECT_EQ(s.conditions.size(), 5u);
  EXPECT_FALSE(s.outcome.has_value());
}

}  // namespace
}  // namespace muster::rdzv
