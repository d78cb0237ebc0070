#include "rendezvous/core/job.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/core/job_harness.h"

namespace muster::rdzv {
namespace {

TEST(JobTest, LargeGatheringTellsJoinersHowFarAfterASecondOnly) {
  JobHarness h(Spec(100, 100));
  for (int i = 1; i <= 70; ++i) ASSERT_TRUE(h.Join(std::to_string(i)).ok());
  // Up to 64 nodes a joiner is told at once (and everyone within a second); above, a joiner
  // is told only if the round has not started a second after its join.
  EXPECT_EQ(h.Last("64", Event::Kind::kProgress)->text.substr(0, 16), "joined 64/100 no");
  for (int i = 65; i <= 70; ++i) EXPECT_TRUE(h.Take(std::to_string(i)).empty()) << i;
  h.Advance(absl::Milliseconds(999));
  for (int i = 65; i <= 70; ++i) EXPECT_TRUE(h.Take(std::to_string(i)).empty()) << i;
  h.Advance(absl::Milliseconds(1));
  for (int i = 65; i <= 70; ++i) {
    std::vector<Event> got = h.Take(std::to_string(i));
    ASSERT_EQ(got.size(), 1u) << i;
    EXPECT_EQ(got[0].kind, Event::Kind::kProgress);
    EXPECT_EQ(got[0].text.substr(0, 16), "joined 70/100 no");
  }
  // Joiners whose round starts within the second hear RoundStarted only.
  for (int i = 71; i <= 100; ++i) ASSERT_TRUE(h.Join(std::to_string(i)).ok());
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  h.Advance(absl::Seconds(2));
  for (int i = 71; i <= 100; ++i) {
    std::vector<Event> got = h.Take(std::to_string(i));
    ASSERT_EQ(got.size(), 1u) << i;
    EXPECT_EQ(got[0].kind, Event::Kind::kRoundStarted);
  }
}

TEST(JobTest, OnlyNodesThatAskGetTheNodeList) {
  JobHarness h(Spec(3, 3));
  ASSERT_TRUE(h.Join("1").ok());
  h.set_wants_node_list(false);
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_TRUE(h.Join("3").ok());
  auto asked = h.Last("1", Event::Kind::kRoundStarted);
  ASSERT_TRUE(asked.has_value());
  ASSERT_EQ(asked->assignment.nodes.size(), 3u);
  EXPECT_EQ(asked->assignment.nodes[2].node_id, "3");
  auto other = h.Last("2", Event::Kind::kRoundStarted);
  ASSERT_TRUE(other.has_value());
  EXPECT_TRUE(other->assignment.nodes.empty());
}

TEST(JobTest, RoundFormsAtMaxWithRanksInArrivalOrder) {
  JobHarness h(Spec(3, 3));
  ASSERT_TRUE(h.Join("1").ok());
  EXPECT_EQ(h.Last("1", Event::Kind::kProgress)->text.substr(0, 14), "joined 1/3 nod");
  ASSERT_TRUE(h.Join("2").ok());
  // The joiner hears how far the gathering is at once, the others within a second.
  EXPECT_EQ(h.Last("2", Event::Kind::kProgress)->text.substr(0, 14), "joined 2/3 nod");
  EXPECT_FALSE(h.Last("1", Event::Kind::kProgress).has_value());
  h.Advance(absl::Milliseconds(999));
  EXPECT_FALSE(h.Last("1", Event::Kind::kProgress).has_value());
  h.Advance(absl::Milliseconds(1));
  EXPECT_EQ(h.Last("1", Event::Kind::kProgress)->text.substr(0, 14), "joined 2/3 nod");
  EXPECT_EQ(h.Last("2", Event::Kind::kProgress)->text.substr(0, 14), "joined 2/3 nod");
  EXPECT_EQ(h.job().phase(), Job::Phase::kGathering);
  ASSERT_TRUE(h.Join("3", -1, 4).ok());
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  int expected_base[] = {0, 2, 4};
  for (int i = 1; i <= 3; ++i) {
    auto e = h.Last(std::to_string(i), Event::Kind::kRoundStarted);
    ASSERT_TRUE(e.has_value()) << i;
    EXPECT_EQ(e->assignment.group_rank, i - 1);
    EXPECT_EQ(e->assignment.rank_base, expected_base[i - 1]);
    EXPECT_EQ(e->assignment.world_size, 8);
    EXPECT_EQ(e->assignment.group_world_size, 3);
    EXPECT_EQ(e->assignment.master_addr, "10.0.0.1");
    EXPECT_EQ(e->assignment.master_port, 1001);
    EXPECT_EQ(e->assignment.restart_count, 0);
    EXPECT_EQ(e->assignment.nodes.size(), 3u);
  }
}

TEST(JobTest, RankHintsAreHonouredAndConflictsNamed) {
  JobHarness h(Spec(3, 3));
  ASSERT_TRUE(h.Join("1", 2).ok());
  ASSERT_TRUE(h.Join("2", 0).ok());
  absl::Status dup = h.Join("3", 2);
  EXPECT_EQ(dup.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(dup.message()).find("host-1"), std::string::npos) << dup;
  EXPECT_NE(std::string(dup.message()).find("host-3"), std::string::npos) << dup;
  EXPECT_EQ(h.Join("4", 3).code(), absl::StatusCode::kInvalidArgument);  // outside 0..2
  ASSERT_TRUE(h.Join("3", 1).ok());
  EXPECT_EQ(h.Last("1", Event::Kind::kRoundStarted)->assignment.group_rank, 2);
  EXPECT_EQ(h.Last("2", Event::Kind::kRoundStarted)->assignment.group_rank, 0);
  EXPECT_EQ(h.Last("3", Event::Kind::kRoundStarted)->assignment.group_rank, 1);
}

TEST(JobTest, APartialHintIsAPositionNotAPriority) {
  // Only one node says --node-rank 2; the unhinted ones fill ranks 0 and 1 in arrival
  // order (found by tests/fuzz/rendezvous_fuzz: the hinted node used to get rank 0).
  JobHarness h(Spec(3, 3));
  ASSERT_TRUE(h.Join("1", 2).ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_TRUE(h.Join("3").ok());
  EXPECT_EQ(h.Last("1", Event::Kind::kRoundStarted)->assignment.group_rank, 2);
  EXPECT_EQ(h.Last("2", Event::Kind::kRoundStarted)->assignment.group_rank, 0);
  EXPECT_EQ(h.Last("3", Event::Kind::kRoundStarted)->assignment.group_rank, 1);
}

TEST(JobTest, AHintBeyondAnElasticRoundFallsBackToOrder) {
  // --nnodes 2:4, a node hinted 3 in a round of 2: the round still forms, hinted first.
  JobSpec spec = Spec(2, 4);
  spec.last_call_timeout = absl::Milliseconds(500);
  JobHarness h(spec);
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2", 3).ok());
  h.Advance(absl::Seconds(1));  // past last_call_timeout
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.Last("2", Event::Kind::kRoundStarted)->assignment.group_rank, 0);
  EXPECT_EQ(h.Last("1", Event::Kind::kRoundStarted)->assignment.group_rank, 1);
}

TEST(JobTest, MismatchedSpecIsRefusedNamingTheFlag) {
  JobHarness h(Spec(2, 2));
  JobSpec other = Spec(2, 3);
  NodeInfo n{.node_id = "9",
             .host = "h9",
             .address = "a9",
             .rank_hint = -1,
             .local_world_size = 1,
             .store_port = 1,
             .probe = ""};
  std::vector<Event> out;
  absl::Status s = h.job().Join(n, other, h.now(), &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("--nnodes 2:3"), std::string::npos) << s;
  other = Spec(2, 2);
  other.run_id = "other";
  s = h.job().Join(n, other, h.now(), &out);
  EXPECT_NE(std::string(s.message()).find("--rdzv-id other"), std::string::npos) << s;
}

TEST(JobTest, ElasticLastCallThenNewcomerTriggersUncountedRound) {
  JobHarness h(Spec(2, 4));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  EXPECT_EQ(h.job().phase(), Job::Phase::kGathering);
  h.Advance(absl::Seconds(29));
  EXPECT_EQ(h.job().phase(), Job::Phase::kGathering);
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants().size(), 2u);
  h.Take("1");
  h.Take("2");
  ASSERT_TRUE(h.Join("3").ok());
  EXPECT_TRUE(h.Last("1", Event::Kind::kStopWorkers).has_value());
  EXPECT_TRUE(h.Last("2", Event::Kind::kStopWorkers).has_value());
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().round(), 2);
  EXPECT_EQ(h.job().restarts_used(), 0);
  auto a3 = h.Last("3", Event::Kind::kRoundStarted);
  ASSERT_TRUE(a3.has_value());
  EXPECT_EQ(a3->assignment.group_rank, 2);      // newcomers follow the survivors
  EXPECT_EQ(a3->assignment.master_port, 1101);  // rank 0's fresh store
  EXPECT_EQ(h.Last("1", Event::Kind::kRoundStarted)->assignment.group_rank, 0);
  EXPECT_FALSE(h.job().history().back().counted);
}

TEST(JobTest, RestartableFailureRestartsEveryoneWithSameRanksAndCount) {
  JobHarness h(Spec(3, 3, 1));
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(h.Join(id).ok());
  for (const char* id : {"1", "2", "3"}) h.Take(id);
  h.Fail("2", 137, true);
  for (const char* id : {"1", "2", "3"}) {
    EXPECT_TRUE(h.Last(id, Event::Kind::kStopWorkers).has_value()) << id;
  }
  h.StopAll();
  for (int i = 1; i <= 3; ++i) {
    auto e = h.Last(std::to_string(i), Event::Kind::kRoundStarted);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->assignment.restart_count, 1);
    EXPECT_EQ(e->assignment.group_rank, i - 1);
    EXPECT_EQ(e->assignment.round, 2);
  }
  // Budget spent: the next restartable failure ends the job with its code, on every node.
  h.Fail("3", 137, true);
  h.Advance(Job::kSettleWindow);
  for (const char* id : {"1", "2", "3"}) {
    auto f = h.Last(id, Event::Kind::kFinished);
    ASSERT_TRUE(f.has_value()) << id;
    EXPECT_EQ(f->outcome.exit_code, 137);
    EXPECT_EQ(f->outcome.root_cause->node_id, "3");
    EXPECT_NE(f->outcome.reason.find("restart budget spent (1 of 1"), std::string::npos)
        << f->outcome.reason;
  }
}

TEST(JobTest, FatalFailureEndsTheJobAfterTheSettleWindow) {
  JobHarness h(Spec(2, 2, 5));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  h.Fail("1", 1, false);
  h.Advance(Job::kSettleWindow);  // job_settle_test.cc: what happens within it
  EXPECT_EQ(h.Last("2", Event::Kind::kFinished)->outcome.exit_code, 1);
  EXPECT_EQ(h.job().restarts_used(), 0);
  // A stale report after the end changes nothing.
  h.Fail("2", 137, true);
  EXPECT_EQ(h.job().outcome()->exit_code, 1);
}

TEST(JobTest, SuccessNeedsEveryNode) {
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  std::vector<Event> out;
  h.job().WorkersSucceeded("1", 1, h.now(), &out);
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  h.job().WorkersSucceeded("1", 1, h.now(), &out);
  h.job().WorkersSucceeded("2", 1, h.now(), &out);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->exit_code, 0);
  EXPECT_EQ(out.size(), 2u);
  // A node of a new job under the same id is told how to start one.
  absl::Status again = h.Join("3");
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.message().find("has already finished"), absl::string_view::npos);
  EXPECT_NE(again.message().find("start the new job with another --rdzv-id"),
            absl::string_view::npos)
      << again.message();
}

TEST(JobTest, AlwaysPolicyRunsAgainAfterSuccess) {
  JobSpec s = Spec(1, 1, 1);
  s.restart_after_success = true;
  JobHarness h(s);
  ASSERT_TRUE(h.Join("1").ok());
  std::vector<Event> out;
  h.job().WorkersSucceeded("1", 1, h.now(), &out);
  EXPECT_EQ(h.job().phase(), Job::Phase::kStopping);
  h.StopAll();
  EXPECT_EQ(h.job().round(), 2);
  h.job().WorkersSucceeded("1", 2, h.now(), &out);
  EXPECT_EQ(h.job().outcome()->exit_code, 0);
}

TEST(JobTest, LostNodeReformsAboveMinAndFails138Below) {
  JobHarness h(Spec(2, 3));
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(h.Join(id).ok());
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  std::vector<Event> lost;
  h.job().NodeLost("2", "stream closed", h.now(), &lost);
  EXPECT_EQ(h.job().phase(), Job::Phase::kStopping);
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants().size(), 2u);
  EXPECT_EQ(h.job().restarts_used(), 0);
  h.Take("1");
  h.Take("3");
  h.job().NodeLost("3", "stream closed", h.now(), &lost);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->exit_code, 138);
  // Not a worker's doing: --fatal-exit-code leaves it transient (agent/lifecycle/failure_report.h).
  EXPECT_EQ(h.job().outcome()->root_cause->kind, FailureKind::kNodeLost);
  EXPECT_NE(h.job().outcome()->reason.find("host-3"), std::string::npos);
  EXPECT_NE(h.job().outcome()->reason.find("minimum 2"), std::string::npos);
}

TEST(JobTest, SilenceIsNotLossOnlyNodeLostRemovesANode) {
  // Liveness is the transport's (docs/operations/liveness-and-partitions.md "muster's own
  // rendezvous (gRPC)"): however long a node is quiet, the job keeps it until its owner reports the
  // connection gone.
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().NextDeadline(), std::nullopt);  // nothing is due while a round runs
  h.Advance(absl::Hours(10));
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants().size(), 2u);
  std::vector<Event> out;
  h.job().NodeLost("2", "stream closed", h.now(), &out);
  EXPECT_EQ(h.job().phase(), Job::Phase::kFinished);
}

TEST(JobTest, NextDeadlineIsTheEarliestPendingOne) {
  JobHarness h(Spec(2, 3, /*restarts=*/1));
  ASSERT_TRUE(h.Join("1").ok());
  EXPECT_EQ(*h.job().NextDeadline(), h.now() + absl::Seconds(1));  // the waiting nodes' progress
  h.Advance(absl::Seconds(1));
  EXPECT_EQ(*h.job().NextDeadline(), h.now() + absl::Seconds(599));  // the join timeout
  ASSERT_TRUE(h.Join("2").ok());
  EXPECT_EQ(*h.job().NextDeadline(), h.now() + absl::Seconds(1));  // progress again
  h.Advance(absl::Seconds(1));
  EXPECT_EQ(*h.job().NextDeadline(), h.now() + absl::Seconds(29));  // the last call
  h.Advance(absl::Seconds(29));
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().NextDeadline(), std::nullopt);
  h.Fail("1", 143, /*restartable=*/true);
  ASSERT_EQ(h.job().phase(), Job::Phase::kStopping);
  EXPECT_EQ(*h.job().NextDeadline(), h.now() + h.spec().stop_timeout);
}

TEST(JobTest, JoinTimeoutFails138) {
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("1").ok());
  h.Advance(absl::Seconds(599));
  EXPECT_EQ(h.job().phase(), Job::Phase::kGathering);
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->exit_code, 138);
  EXPECT_NE(h.job().outcome()->reason.find("rendezvous timed out"), std::string::npos);
  EXPECT_EQ(h.Join("2").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobTest, NodeThatNeverStopsIsDroppedAfterStopTimeout) {
  JobSpec s = Spec(2, 3, 1);
  JobHarness h(s);
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(h.Join(id).ok());
  h.Fail("1", 143, true);
  std::vector<Event> out;
  h.job().WorkersStopped("1", 1, 2001, h.now(), &out);
  h.job().WorkersStopped("2", 1, 2002, h.now(), &out);
  EXPECT_EQ(h.job().phase(), Job::Phase::kStopping);
  h.Advance(s.stop_timeout);
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().participants().size(), 2u);
}

const Condition& Cond(const Job& job, const std::string& type) {
  for (const Condition& c : job.conditions()) {
    if (c.type == type) return c;
  }
  static const Condition kMissing;
  ADD_FAILURE() << "no condition " << type;
  return kMissing;
}

TEST(JobTest, ConditionsFollowTheJobWithTransitionTimesFromTheClock) {
  JobHarness h(Spec(3, 3, 1));
  const absl::Time t0 = h.now();
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_EQ(h.job().conditions().size(), 5u);
  EXPECT_TRUE(Cond(h.job(), "Created").status);
  EXPECT_FALSE(Cond(h.job(), "Running").status);
  EXPECT_EQ(Cond(h.job(), "Running").reason, "Gathering");

  h.Advance(absl::Seconds(2));
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_TRUE(h.Join("3").ok());
  EXPECT_TRUE(Cond(h.job(), "Running").status);
  EXPECT_EQ(Cond(h.job(), "Running").reason, "RoundStarted");
  EXPECT_EQ(Cond(h.job(), "Running").last_transition, t0 + absl::Seconds(2));
  EXPECT_EQ(Cond(h.job(), "Running").message,
            "round 1: 6 workers on 3 nodes (0 of 1 restarts used)");
  // Never True so far: its time is still the job's start, though its reason changed.
  EXPECT_EQ(Cond(h.job(), "Restarting").last_transition, t0);
  EXPECT_EQ(Cond(h.job(), "Restarting").reason, "RoundStarted");

  h.Advance(absl::Seconds(5));
  h.Fail("2", 137, true);
  EXPECT_FALSE(Cond(h.job(), "Running").status);
  EXPECT_EQ(Cond(h.job(), "Running").reason, "WorkerFailed");
  EXPECT_EQ(Cond(h.job(), "Running").last_transition, t0 + absl::Seconds(7));
  EXPECT_TRUE(Cond(h.job(), "Restarting").status);
  EXPECT_EQ(Cond(h.job(), "Restarting").last_transition, t0 + absl::Seconds(7));
  EXPECT_NE(Cond(h.job(), "Restarting").message.find("rank 1 on host-2 failed: exit 137"),
            std::string::npos)
      << Cond(h.job(), "Restarting").message;

  h.Advance(absl::Seconds(1));
  h.StopAll();
  EXPECT_TRUE(Cond(h.job(), "Running").status);
  EXPECT_EQ(Cond(h.job(), "Running").last_transition, t0 + absl::Seconds(8));
  EXPECT_FALSE(Cond(h.job(), "Restarting").status);
  EXPECT_EQ(Cond(h.job(), "Restarting").last_transition, t0 + absl::Seconds(8));

  h.Advance(absl::Seconds(3));
  h.Fail("3", 1, false);
  h.Advance(Job::kSettleWindow);  // a fatal failure of a round of 3 waits for it
  EXPECT_TRUE(Cond(h.job(), "Failed").status);
  EXPECT_EQ(Cond(h.job(), "Failed").reason, "NotRestartable");
  EXPECT_EQ(Cond(h.job(), "Failed").last_transition, t0 + absl::Seconds(14));
  EXPECT_EQ(Cond(h.job(), "Failed").message, h.job().outcome()->reason);
  EXPECT_FALSE(Cond(h.job(), "Succeeded").status);
  EXPECT_EQ(Cond(h.job(), "Succeeded").last_transition, t0);
  EXPECT_FALSE(Cond(h.job(), "Running").status);
  EXPECT_EQ(Cond(h.job(), "Running").last_transition, t0 + absl::Seconds(14));
  EXPECT_EQ(Cond(h.job(), "Created").last_transition, t0);
}

TEST(JobTest, FinishReasonsNameTheCause) {
  {
    JobHarness h(Spec(1, 1, 0));
    ASSERT_TRUE(h.Join("1").ok());
    h.Fail("1", 137, true);
    EXPECT_EQ(Cond(h.job(), "Failed").reason, "RestartBudgetSpent");
  }
  {
    JobHarness h(Spec(1, 1, 0));
    ASSERT_TRUE(h.Join("1").ok());
    std::vector<Event> out;
    h.job().WorkersSucceeded("1", 1, h.now(), &out);
    EXPECT_TRUE(Cond(h.job(), "Succeeded").status);
    EXPECT_EQ(Cond(h.job(), "Succeeded").reason, "AllWorkersSucceeded");
    EXPECT_FALSE(Cond(h.job(), "Failed").status);
  }
  {
    JobHarness h(Spec(2, 2, 0));
    ASSERT_TRUE(h.Join("1").ok());
    ASSERT_TRUE(h.Join("2").ok());
    std::vector<Event> out;
    h.job().NodeLost("2", "stream closed", h.now(), &out);
    EXPECT_EQ(Cond(h.job(), "Failed").reason, "NodeLost");
  }
}

TEST(JobTest, TheStderrTailNamesTheCauseAndStaysWithTheOutcomeOnly) {
  JobHarness h(Spec(2, 2, 1));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  h.Fail("1", 137, true, "", "Traceback (most recent call last):\n  File \"t.py\"\nOSError: first");
  auto stop = h.Last("2", Event::Kind::kStopWorkers);
  ASSERT_TRUE(stop.has_value() && stop->failure.has_value());
  EXPECT_NE(stop->text.find("failed: exit 137: OSError: first; restarting"), std::string::npos)
      << stop->text;
  EXPECT_EQ(stop->failure->stderr_tail, "");  // every node gets the stop; one needs the lines
  h.StopAll();
  const std::string tail =
      "Traceback (most recent call last):\nValueError: " + std::string(300, 'v');
  h.Fail("2", 1, false, "", tail);
  h.Advance(Job::kSettleWindow);
  auto finished = h.Last("1", Event::Kind::kFinished);
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ(finished->outcome.root_cause->stderr_tail, tail);
  // A long last line is cut to kMaxDetailBytes in the one-line reason.
  const std::string detail = "ValueError: " + std::string(241, 'v') + "...";
  EXPECT_EQ(FailureDetail(*finished->outcome.root_cause), detail);
  EXPECT_NE(finished->outcome.reason.find("failed: exit 1: " + detail + "; not restartable"),
            std::string::npos)
      << finished->outcome.reason;
  // One record, for the restart that happened; the final failure is the outcome's.
  ASSERT_EQ(h.job().history().size(), 1u);
  EXPECT_TRUE(h.job().history()[0].counted);
  for (const RestartRecord& r : h.job().history()) EXPECT_EQ(r.failure->stderr_tail, "");
}

TEST(JobTest, FailureDetailPrefersTheErrorFileMessageAndCutsOnACharacter) {
  EXPECT_EQ(FailureDetail(Failure{.message = "boom", .stderr_tail = "a\nb"}), "boom");
  EXPECT_EQ(FailureDetail(Failure{.stderr_tail = "a\nlast"}), "last");
  EXPECT_EQ(FailureDetail(Failure{}), "");
  // 2-byte characters from byte 2 on: byte 253 is the second byte of one, so the cut
  // comes a byte earlier.
  std::string line = "xy";
  for (int i = 0; i < 200; ++i) line += "\xC3\xA9";
  std::string detail = FailureDetail(Failure{.stderr_tail = line});
  EXPECT_EQ(detail.size(), 252u + 3);
  EXPECT_EQ(detail.substr(249), "\xA9\xC3\xA9...");
}

// The etcd backend's next coordinator continues the job of the one that is gone.
TEST(JobTest, AContinuedJobKeepsItsRoundBudgetAndHistory) {
  JobHarness h(Spec(2, 2, 3));
  std::vector<RestartRecord> history = {
      {.round = 2, .attempt = 1, .reason = "worker failure", .counted = true},
      {.round = 3, .attempt = 1, .reason = "node lost: the coordinator", .counted = false}};
  h.job().ContinueFrom(3, 1, history);
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  auto e = h.Last("1", Event::Kind::kRoundStarted);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->assignment.round, 4);
  EXPECT_EQ(e->assignment.restart_count, 1);
  EXPECT_EQ(h.job().history().size(), 2u);
  // The budget left is the previous owner's: two more restarts, then the outcome.
  h.Fail("1", 1, true);
  h.StopAll();
  h.Fail("2", 1, true);
  h.StopAll();
  EXPECT_EQ(h.job().restarts_used(), 3);
  h.Fail("1", 1, true);
  h.Advance(Job::kSettleWindow);
  ASSERT_TRUE(h.job().outcome().has_value());
  EXPECT_EQ(h.job().outcome()->exit_code, 1);
}

// A next coordinator keeps the previous one's order for the survivors: the one that was
// group rank 2 joins first, the one that was 1 second, and a newcomer third; they become
// group ranks 0, 1 (the old order) and 2 (the newcomer), as survivors do under one owner.
TEST(JobTest, AContinuedJobKeepsThePreviousOrderOfItsSurvivors) {
  JobHarness h(Spec(3, 3, 0));
  h.job().ContinueFrom(1, 0, {}, {"9", "1", "2"});
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_TRUE(h.Join("3").ok());
  ASSERT_TRUE(h.Join("1").ok());
  for (auto [id, rank] : {std::pair<const char*, int>{"1", 0}, {"2", 1}, {"3", 2}}) {
    auto e = h.Last(id, Event::Kind::kRoundStarted);
    ASSERT_TRUE(e.has_value()) << id;
    EXPECT_EQ(e->assignment.group_rank, rank) << id;
    EXPECT_EQ(e->assignment.round, 2);
  }
}

}  // namespace
}  // namespace muster::rdzv
