#include "rendezvous/core/join_checks.h"

#include <string>

#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

NodeInfo Node() {
  NodeInfo n;
  n.node_id = "n1";
  n.host = "host1";
  n.address = "10.0.0.1";
  return n;
}

JobSpec Spec(int min, int max) {
  JobSpec s;
  s.run_id = "job";
  s.min_nodes = min;
  s.max_nodes = max;
  return s;
}

// The error's message contains `part` (and is InvalidArgument).
testing::AssertionResult Refused(const absl::Status& s, const std::string& part) {
  if (!absl::IsInvalidArgument(s)) return testing::AssertionFailure() << s;
  if (s.message().find(part) == absl::string_view::npos) {
    return testing::AssertionFailure() << s << " does not mention " << part;
  }
  return testing::AssertionSuccess();
}

TEST(JoinChecksTest, ASpecNoJobCanRunIsRefused) {
  EXPECT_TRUE(CheckJobSpec(Spec(1, 2), Node()).ok());
  EXPECT_TRUE(Refused(CheckJobSpec(Spec(0, 2), Node()), "--nnodes 0:2"));
  EXPECT_TRUE(Refused(CheckJobSpec(Spec(3, 2), Node()), "1 <= MIN <= MAX"));
  JobSpec s = Spec(1, 1);
  s.max_restarts = -1;
  EXPECT_TRUE(Refused(CheckJobSpec(s, Node()), "--max-restarts -1"));
  s = Spec(1, 1);
  s.heartbeat_misses = 0;
  EXPECT_TRUE(Refused(CheckJobSpec(s, Node()), "heartbeat_misses"));
  s = Spec(1, 1);
  s.stop_timeout = absl::Seconds(-1);
  EXPECT_TRUE(Refused(CheckJobSpec(s, Node()), "negative"));
  EXPECT_TRUE(Refused(CheckJobSpec(Spec(0, 0), Node()), "host1 (10.0.0.1, node n1)"));
}

TEST(JoinChecksTest, EveryNodeMustShareTheQuarantineThreshold) {
  JobSpec job = Spec(1, 3);
  job.quarantine_after = 2;
  JobSpec other = job;
  other.quarantine_after = 0;
  EXPECT_TRUE(Refused(CheckSameJobSpec(job, other, Node()),
                      "--quarantine-after 0 of node host1 (10.0.0.1, node n1) differs from the "
                      "job's 2"));
  other.quarantine_after = -1;
  EXPECT_TRUE(Refused(CheckJobSpec(other, Node()), "--quarantine-after -1 < 0"));
}

TEST(JoinChecksTest, EveryNodeMustShareTheJobsSpecNamingTheFlag) {
  JobSpec job = Spec(2, 4);
  EXPECT_TRUE(CheckSameJobSpec(job, job, Node()).ok());
  JobSpec other = job;
  other.heartbeat_interval = absl::Seconds(1);  // each node's own liveness: not shared
  EXPECT_TRUE(CheckSameJobSpec(job, other, Node()).ok());
  other = job;
  other.run_id = "other";
  EXPECT_TRUE(Refused(CheckSameJobSpec(job, other, Node()), "--rdzv-id other"));
  EXPECT_TRUE(Refused(CheckSameJobSpec(job, Spec(2, 3), Node()), "--nnodes 2:3"));
  other = job;
  other.max_restarts = 3;
  EXPECT_TRUE(Refused(CheckSameJobSpec(job, other, Node()), "--max-restarts 3"));
  other = job;
  other.restart_after_success = true;
  EXPECT_TRUE(Refused(CheckSameJobSpec(job, other, Node()), "--restart-policy Always"));
}

TEST(JoinChecksTest, ANodeMustBringWorkersAndAHintInsideTheJob) {
  NodeInfo n = Node();
  EXPECT_TRUE(CheckNodeFits(n, Spec(1, 3)).ok());
  n.local_world_size = 0;
  EXPECT_TRUE(Refused(CheckNodeFits(n, Spec(1, 3)), "has no workers"));
  n.local_world_size = kMaxLocalWorldSize + 1;
  EXPECT_TRUE(Refused(CheckNodeFits(n, Spec(1, 3)), "--nproc-per-node"));
  n.local_world_size = kMaxLocalWorldSize;
  EXPECT_TRUE(CheckNodeFits(n, Spec(1, 3)).ok());
  n.rank_hint = 3;
  EXPECT_TRUE(Refused(CheckNodeFits(n, Spec(1, 3)), "outside 0..2"));
  n.rank_hint = 2;
  EXPECT_TRUE(CheckNodeFits(n, Spec(1, 3)).ok());
}

}  // namespace
}  // namespace muster::rdzv
