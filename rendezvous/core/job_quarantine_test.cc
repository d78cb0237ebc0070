// The bad-node memory in a Job (job.cc's QuarantineDue, bad_nodes.h): a host that was the
// root cause of --quarantine-after failed attempts is kept out for the rest of the job when
// the next round can form without it, listed as Quarantined with its reasons; otherwise it
// stays, and the stop reason says why. The memory continues from a previous owner's history.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/core/job.h"
#include "rendezvous/core/job_harness.h"
#include "rendezvous/core/job_status.h"

namespace muster::rdzv {
namespace {

JobSpec QuarantineSpec(int min, int max, int after = 2) {
  JobSpec s = Spec(min, max, /*restarts=*/5);
  s.quarantine_after = after;
  return s;
}

const NodeStatus* NodeOf(const JobStatusSnapshot& s, const std::string& id) {
  for (const NodeStatus& n : s.nodes) {
    if (n.node_id == id) return &n;
  }
  return nullptr;
}

std::vector<std::string> ParticipantIds(const Job& job) {
  std::vector<std::string> ids;
  for (const NodeInfo& n : job.participants()) ids.push_back(n.node_id);
  return ids;
}

// Node 2's worker fails in the running round, and every node stops.
void FailAndStop(JobHarness& h, const std::string& id) {
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  h.Fail(id, 1, /*restartable=*/true);
  ASSERT_EQ(h.job().phase(), Job::Phase::kStopping);
  h.StopAll();
}

// A report names its host, but the job counts the failure against the host the node joined
// from: a report with an empty or wrong host neither spares that host nor blames another.
TEST(JobQuarantineTest, AFailureCountsAgainstTheHostTheNodeJoinedFromNotTheReportsHost) {
  JobHarness h(QuarantineSpec(1, 3));
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(h.Join(id).ok());
  for (const char* reported_host : {"", "host-3"}) {
    ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
    Failure f{.node_id = "2",
              .host = reported_host,
              .rank = 1,
              .local_rank = 1,
              .pid = 42,
              .code = 1,
              .what = "exit 1",
              .restartable = true};
    std::vector<Event> events;
    h.job().WorkerFailed("2", h.job().round(), f, h.now(), &events);
    ASSERT_EQ(h.job().phase(), Job::Phase::kStopping);
    ASSERT_TRUE(h.job().history().back().failure.has_value());
    EXPECT_EQ(h.job().history().back().failure->host, "host-2");
    h.StopAll();
  }
  EXPECT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "3"}));
  EXPECT_EQ(NodeOf(JobStatusOf(h.job()), "2")->state, NodeState::kQuarantined);
  EXPECT_EQ(NodeOf(JobStatusOf(h.job()), "3")->state, NodeState::kRunning);
}

TEST(JobQuarantineTest, AnElasticJobQuarantinesAHostAfterTwoRootCausesAndRunsWithoutIt) {
  JobHarness h(QuarantineSpec(1, 3));
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(h.Join(id).ok());
  FailAndStop(h, "2");  // once: it stays
  EXPECT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_EQ(h.job().history().back().reason.find("quarantined"), std::string::npos)
      << h.job().history().back().reason;
  h.Take("2");

  h.Fail("2", 1, /*restartable=*/true);  // twice: out
  const std::string reason = h.job().history().back().reason;
  EXPECT_NE(reason.find("restarting (2 of 5 restarts used); host host-2 quarantined: root cause "
                        "of 2 failed attempts (round 1: rank 1 exit 1; round 2: rank 1 exit 1)"),
            std::string::npos)
      << reason;
  auto told = h.Last("2", Event::Kind::kProgress);
  ASSERT_TRUE(told.has_value());
  EXPECT_EQ(told->text.find("kept out of rounds for the rest of the job: quarantined: root cause "
                            "of 2 failed attempts"),
            0u)
      << told->text;
  EXPECT_EQ(told->quarantined.find("quarantined: root cause of 2 failed attempts"), 0u);
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "3"}));
  JobStatusSnapshot s = JobStatusOf(h.job());
  ASSERT_NE(NodeOf(s, "2"), nullptr);
  EXPECT_EQ(NodeOf(s, "2")->state, NodeState::kQuarantined);
  EXPECT_EQ(NodeOf(s, "2")->excluded.find("quarantined: root cause of 2 failed attempts"), 0u)
      << NodeOf(s, "2")->excluded;
  EXPECT_EQ(std::string(NodeStateName(NodeOf(s, "2")->state)), "Quarantined");

  // Its health gate cannot bring it back, and a new agent on that host joins quarantined.
  h.Take("1");
  h.Health("2", "");
  EXPECT_FALSE(h.Last("1", Event::Kind::kStopWorkers).has_value());
  EXPECT_EQ(NodeOf(JobStatusOf(h.job()), "2")->state, NodeState::kQuarantined);
  std::vector<Event> events;
  NodeInfo again{.node_id = "4", .host = "host-2", .address = "10.0.0.4", .local_world_size = 2};
  ASSERT_TRUE(h.job().Join(again, h.spec(), h.now(), &events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].quarantined, NodeOf(JobStatusOf(h.job()), "4")->excluded);
  EXPECT_EQ(NodeOf(JobStatusOf(h.job()), "4")->state, NodeState::kQuarantined);
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);  // no re-forming for it
  EXPECT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "3"}));

  // It does not hold the job: the others' success ends it.
  h.job().WorkersSucceeded("1", h.job().round(), h.now(), &events);
  h.job().WorkersSucceeded("3", h.job().round(), h.now(), &events);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->exit_code, 0);
}

// A fixed-size job with a hot spare (docs/guides/spares.md): the spare is the one more
// eligible node that lets the due host go; the next round runs with the spare in its place
// and the same number of nodes.
TEST(JobQuarantineTest, ASpareLetsAFixedSizeJobQuarantineAndTakesThePlace) {
  JobSpec spec = QuarantineSpec(2, 2);
  spec.spares = 1;
  JobHarness h(spec);
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(h.Join(id).ok());
  ASSERT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(NodeOf(JobStatusOf(h.job()), "3")->state, NodeState::kSpare);
  FailAndStop(h, "2");
  ASSERT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "2"}));
  h.Take("2");
  FailAndStop(h, "2");  // twice: out, and the spare comes in
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "3"}));
  EXPECT_EQ(NodeOf(JobStatusOf(h.job()), "2")->state, NodeState::kQuarantined);
  EXPECT_NE(h.job().history().back().reason.find("host host-2 quarantined"), std::string::npos)
      << h.job().history().back().reason;
}

TEST(JobQuarantineTest, AFixedSizeJobKeepsADueHostAndSaysWhy) {
  JobHarness h(QuarantineSpec(2, 2));
  for (const char* id : {"1", "2"}) ASSERT_TRUE(h.Join(id).ok());
  FailAndStop(h, "2");
  h.Fail("2", 1, /*restartable=*/true);
  const std::string reason = h.job().history().back().reason;
  EXPECT_NE(reason.find("host host-2 stays in the job though it was the root cause of 2 failed "
                        "attempts (--quarantine-after 2): without it 1 node would be left, fewer "
                        "than the minimum 2 (--nnodes)"),
            std::string::npos)
      << reason;
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(NodeOf(JobStatusOf(h.job()), "2")->state, NodeState::kRunning);
}

TEST(JobQuarantineTest, AOneNodeJobSaysNothingOfAQuarantineItCannotHave) {
  JobHarness h(QuarantineSpec(1, 1));
  ASSERT_TRUE(h.Join("1").ok());
  for (int i = 0; i < 3; ++i) FailAndStop(h, "1");
  EXPECT_EQ(h.job().history().back().reason.find("host-1 stays"), std::string::npos)
      << h.job().history().back().reason;
  EXPECT_EQ(h.job().history()[1].reason.find("stays"), std::string::npos)
      << h.job().history()[1].reason;
  EXPECT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1"}));
}

TEST(JobQuarantineTest, ADueHostLeavesOnceAnotherNodeLetsTheRoundFormWithoutIt) {
  JobHarness h(QuarantineSpec(2, 3));
  for (const char* id : {"1", "2"}) ASSERT_TRUE(h.Join(id).ok());
  h.Advance(h.spec().last_call_timeout);
  FailAndStop(h, "2");
  FailAndStop(h, "2");  // due, but 1 node would be left of a minimum of 2
  EXPECT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "2"}));

  ASSERT_TRUE(h.Join("3").ok());  // re-forms the running round (uncounted)...
  ASSERT_EQ(h.job().phase(), Job::Phase::kStopping);
  h.StopAll();  // ...and the next round forms without the due host
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "3"}));
  EXPECT_EQ(NodeOf(JobStatusOf(h.job()), "2")->state, NodeState::kQuarantined);
  EXPECT_EQ(h.job().restarts_used(), 2);
}

TEST(JobQuarantineTest, ANextOwnerContinuesTheCountsFromTheHistory) {
  JobHarness first(QuarantineSpec(1, 3));
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(first.Join(id).ok());
  FailAndStop(first, "2");

  // The etcd backend's next coordinator: a new Job continued from the first one's history.
  JobHarness next(QuarantineSpec(1, 3));
  next.job().ContinueFrom(first.job().round(), first.job().restarts_used(), first.job().history());
  EXPECT_EQ(next.job().bad_nodes().count("host-2"), 1);
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(next.Join(id).ok());
  FailAndStop(next, "2");
  ASSERT_EQ(next.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(ParticipantIds(next.job()), (std::vector<std::string>{"1", "3"}));
  EXPECT_TRUE(next.job().bad_nodes().quarantined("host-2"));
}

TEST(JobQuarantineTest, ZeroTurnsTheQuarantineOff) {
  JobHarness h(QuarantineSpec(1, 2, /*after=*/0));
  for (const char* id : {"1", "2"}) ASSERT_TRUE(h.Join(id).ok());
  for (int i = 0; i < 3; ++i) FailAndStop(h, "2");
  EXPECT_EQ(ParticipantIds(h.job()), (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(h.job().history().back().reason.find("quarantine"), std::string::npos);
}

}  // namespace
}  // namespace muster::rdzv
