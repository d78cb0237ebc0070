// Job::Preempt (docs/guides/preemption.md): the notice reaches every node before anything stops,
// the job shows Preempting, and the preempted node's loss re-forms an elastic job or ends a
// fixed-size one with 143.
#include "gtest/gtest.h"
#include "rendezvous/core/job_harness.h"
#include "rendezvous/core/job_status.h"

namespace muster::rdzv {
namespace {

// Two nodes of a running round; events of the round's start are taken.
void RunTwoNodes(JobHarness& h) {
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  if (h.job().phase() != Job::Phase::kRunning) h.Advance(h.spec().last_call_timeout);
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  h.Take("1");
  h.Take("2");
}

TEST(JobPreemptTest, EveryNodeHearsTheNoticeNamingThePreemptedNode) {
  JobHarness h(Spec(2, 2));
  RunTwoNodes(h);
  std::vector<Event> out;
  ASSERT_TRUE(h.job().Preempt("2", "agent received SIGTERM", h.now(), &out).ok());
  ASSERT_EQ(out.size(), 2u);
  for (const Event& e : out) {
    EXPECT_EQ(e.kind, Event::Kind::kPreempt);
    EXPECT_EQ(e.preempted_node, "2");
    EXPECT_EQ(e.preempted_host, "host-2");
    EXPECT_EQ(e.text, "agent received SIGTERM");
  }
  EXPECT_NE(out[0].node_id, out[1].node_id);
  // Nothing is stopped by the notice itself, and a second notice of that node is no news.
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  std::vector<Event> again;
  ASSERT_TRUE(h.job().Preempt("2", "again", h.now(), &again).ok());
  EXPECT_TRUE(again.empty());
  JobStatusSnapshot s = JobStatusOf(h.job());
  EXPECT_EQ(s.phase, JobPhase::kPreempting);
  EXPECT_STREQ(JobPhaseName(s.phase), "Preempting");
  ASSERT_EQ(s.preempting.size(), 1u);
  EXPECT_EQ(s.preempting[0].host, "host-2");
  EXPECT_EQ(s.preempting[0].reason, "agent received SIGTERM");
}

// `muster drain --node ID | --host H` (both backends' drains call it).
TEST(JobPreemptTest, NodeToDrainByIdOrTheOneNodeOnAHost) {
  JobHarness h(Spec(2, 3));
  RunTwoNodes(h);
  absl::StatusOr<NodeInfo> by_id = h.job().NodeToDrain("2", "");
  ASSERT_TRUE(by_id.ok()) << by_id.status();
  EXPECT_EQ(by_id->host, "host-2");
  absl::StatusOr<NodeInfo> by_host = h.job().NodeToDrain("", "host-1");
  ASSERT_TRUE(by_host.ok()) << by_host.status();
  EXPECT_EQ(by_host->node_id, "1");
  absl::StatusOr<NodeInfo> none = h.job().NodeToDrain("9", "");
  EXPECT_TRUE(absl::IsNotFound(none.status()));
  EXPECT_NE(none.status().message().find("has no live node 9"), std::string::npos);
  // A second node on host-1: the host no longer names one node.
  NodeInfo twin{.node_id = "3", .host = "host-1", .address = "10.0.0.3", .local_world_size = 2};
  std::vector<Event> out;
  ASSERT_TRUE(h.job().Join(twin, h.spec(), h.now(), &out).ok());
  absl::StatusOr<NodeInfo> several = h.job().NodeToDrain("", "host-1");
  EXPECT_TRUE(absl::IsInvalidArgument(several.status())) << several.status();
  EXPECT_NE(several.status().message().find("--node ID"), std::string::npos);
}

TEST(JobPreemptTest, FixedSizeJobEndsWith143WhenThePreemptedNodeLeaves) {
  JobHarness h(Spec(2, 2, /*restarts=*/3));
  RunTwoNodes(h);
  std::vector<Event> out;
  ASSERT_TRUE(h.job().Preempt("2", "spot notice", h.now(), &out).ok());
  h.job().NodeLost("2", "left: preempted", h.now(), &out);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->exit_code, 143);
  EXPECT_NE(h.job().outcome()->reason.find("preempted: spot notice"), std::string::npos)
      << h.job().outcome()->reason;
  EXPECT_EQ(h.job().restarts_used(), 0);
}

TEST(JobPreemptTest, ElasticJobReformsWithoutThePreemptedNodeAndForgetsTheNotice) {
  JobHarness h(Spec(1, 2, /*restarts=*/0));
  RunTwoNodes(h);
  std::vector<Event> out;
  ASSERT_TRUE(h.job().Preempt("2", "drained", h.now(), &out).ok());
  h.job().NodeLost("2", "left: preempted", h.now(), &out);
  h.Take("1");
  ASSERT_EQ(h.job().phase(), Job::Phase::kStopping);
  EXPECT_EQ(h.job().history().back().reason.find("preempted: drained") != std::string::npos, true)
      << h.job().history().back().reason;
  EXPECT_FALSE(h.job().history().back().counted);
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants().size(), 1u);
  EXPECT_TRUE(h.job().preempting().empty());
  EXPECT_EQ(PhaseOf(h.job()), JobPhase::kRunning);
}

TEST(JobPreemptTest, UnknownNodesAndIdleJobsAreRefused) {
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("1").ok());
  std::vector<Event> out;
  EXPECT_EQ(h.job().Preempt("9", "x", h.now(), &out).code(), absl::StatusCode::kNotFound);
  // Gathering: no round runs, nothing to checkpoint.
  EXPECT_EQ(h.job().Preempt("1", "x", h.now(), &out).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(out.empty());
}

// The etcd backend's next coordinator carries a preemption of the lost coordinator's round
// (rendezvous/etcd/carried_preemptions.h): the preempted node's leaving ends a job left
// below MIN with 143, as its loss during the round would; with MIN left, nothing changes.
TEST(JobPreemptTest, ACarriedPreemptionEndsAJobLeftBelowMinWith143) {
  JobHarness h(Spec(2, 3));
  h.job().ContinueFrom(1, 0, {}, {"1", "2", "3"});
  ASSERT_TRUE(h.Join("2").ok());
  h.Take("2");
  const Preemption p{.node_id = "3", .host = "host-3", .reason = "maintenance", .since = h.now()};
  std::vector<Event> out;
  h.job().PreemptedNodeLeft(p, h.now(), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Event::Kind::kFinished);
  EXPECT_EQ(out[0].node_id, "2");
  EXPECT_EQ(out[0].outcome.exit_code, 143);
  EXPECT_EQ(out[0].outcome.root_cause->kind, FailureKind::kPreempted);
  ASSERT_TRUE(out[0].outcome.root_cause.has_value());
  EXPECT_EQ(out[0].outcome.root_cause->node_id, "3");
  EXPECT_NE(out[0].outcome.reason.find("node host-3 preempted: maintenance; 1 node left"),
            std::string::npos)
      << out[0].outcome.reason;

  JobHarness enough(Spec(1, 3));
  enough.job().ContinueFrom(1, 0, {}, {"1", "2", "3"});
  ASSERT_TRUE(enough.Join("2").ok());
  std::vector<Event> none;
  enough.job().PreemptedNodeLeft(p, enough.now(), &none);
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(enough.job().outcome().has_value());
}

}  // namespace
}  // namespace muster::rdzv
