// The settle window (settle_window.h): a fatal failure of a round of several nodes waits
// kSettleWindow for a loss that would explain it.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/core/job.h"
#include "rendezvous/core/job_harness.h"

namespace muster::rdzv {
namespace {

constexpr absl::Duration kWindow = Job::kSettleWindow;

const Condition& SettleCond(const Job& job, const std::string& type) {
  for (const Condition& c : job.conditions()) {
    if (c.type == type) return c;
  }
  static const Condition none;
  return none;
}

TEST(JobSettleTest, AFatalFailureThenALossWithinTheWindowReformsWithoutTheBudget) {
  JobHarness h(Spec(2, 3, 0));
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(h.Join(id).ok());
  for (const char* id : {"1", "2", "3"}) h.Take(id);
  h.Fail("2", 1, false);
  // Nothing decided, nothing said: the round runs on.
  for (const char* id : {"1", "2", "3"}) EXPECT_TRUE(h.Take(id).empty()) << id;
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  ASSERT_TRUE(h.job().held_failure().has_value());
  EXPECT_EQ(h.job().held_failure()->failure.node_id, "2");
  EXPECT_EQ(h.job().NextDeadline(), h.now() + kWindow);
  EXPECT_EQ(HoldNotice(*h.job().held_failure()),
            "holding the failure of rank 1 on host-2 (exit 1) for 3s: a node lost meanwhile "
            "makes it a membership change");
  h.Advance(absl::Milliseconds(400));
  std::vector<Event> out;
  h.job().NodeLost("3", "its etcd lease ended", h.now(), &out);
  ASSERT_EQ(out.size(), 2u);
  const std::string reason =
      "node host-3 (10.0.0.3) lost: its etcd lease ended; rank 1 on host-2 failed: exit 1, 0.4 s "
      "before node host-3 was lost: judged a consequence of the loss; re-forming with the 2 "
      "nodes left";
  for (const Event& e : out) {
    EXPECT_EQ(e.kind, Event::Kind::kStopWorkers);
    EXPECT_FALSE(e.counted);
    EXPECT_EQ(e.text, reason);
  }
  EXPECT_FALSE(h.job().held_failure().has_value());
  ASSERT_EQ(h.job().history().size(), 1u);
  EXPECT_FALSE(h.job().history()[0].counted);
  EXPECT_EQ(h.job().history()[0].reason, reason);
  EXPECT_EQ(SettleCond(h.job(), "Restarting").reason, "NodeLost");
  h.StopAll();
  EXPECT_EQ(h.job().round(), 2);
  EXPECT_EQ(h.job().restarts_used(), 0);
  auto started = h.Last("1", Event::Kind::kRoundStarted);
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->assignment.world_size, 4);
  EXPECT_EQ(started->assignment.restart_count, 0);
  // The window is gone with the round: nothing fires at the old deadline.
  h.Advance(kWindow);
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
}

TEST(JobSettleTest, AFatalFailureWithoutALossFinishesAtTheDeadlineAsBefore) {
  JobHarness h(Spec(2, 2, 5));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  h.Fail("1", 1, false, "boom");
  h.Advance(kWindow - absl::Milliseconds(1));
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_FALSE(h.Last("2", Event::Kind::kFinished).has_value());
  h.Advance(absl::Milliseconds(1));
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  for (const char* id : {"1", "2"}) {
    auto f = h.Last(id, Event::Kind::kFinished);
    ASSERT_TRUE(f.has_value()) << id;
    EXPECT_EQ(f->outcome.exit_code, 1);
    EXPECT_EQ(f->outcome.reason, "rank 1 on host-1 failed: exit 1: boom; not restartable");
    EXPECT_EQ(f->outcome.root_cause->node_id, "1");
  }
  EXPECT_EQ(SettleCond(h.job(), "Failed").reason, "NotRestartable");
  EXPECT_EQ(h.job().restarts_used(), 0);
  EXPECT_TRUE(h.job().history().empty());
  EXPECT_FALSE(h.job().NextDeadline().has_value());
}

TEST(JobSettleTest, ASpentBudgetIsHeldTooAndEndsAsBefore) {
  JobHarness h(Spec(2, 2, 0));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  h.Fail("1", 137, true);
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  h.Advance(kWindow);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->exit_code, 137);
  EXPECT_EQ(SettleCond(h.job(), "Failed").reason, "RestartBudgetSpent");
}

TEST(JobSettleTest, ARestartableFailureWithBudgetLeftDecidesAtOnce) {
  JobHarness h(Spec(2, 2, 1));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  h.Fail("1", 143, true);
  EXPECT_EQ(h.job().phase(), Job::Phase::kStopping);
  EXPECT_FALSE(h.job().held_failure().has_value());
  EXPECT_EQ(h.job().restarts_used(), 1);
  EXPECT_TRUE(h.Last("2", Event::Kind::kStopWorkers)->counted);
}

TEST(JobSettleTest, ASingleNodeRoundDecidesAtOnce) {
  JobHarness h(Spec(1, 2, 0));
  ASSERT_TRUE(h.Join("1").ok());
  h.Advance(h.spec().last_call_timeout);
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  h.Fail("1", 1, false);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->exit_code, 1);
}

TEST(JobSettleTest, TheFirstFatalFailureIsTheRootCauseAndLaterOnesDecideNothing) {
  JobHarness h(Spec(3, 3, 5));
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(h.Join(id).ok());
  h.Fail("1", 1, false);
  h.Advance(absl::Milliseconds(100));
  h.Fail("2", 2, false);
  h.Fail("3", 143, true);  // restartable with budget left: still the held one's consequence
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().restarts_used(), 0);
  EXPECT_EQ(h.job().held_failure()->failure.node_id, "1");
  // The later failures show in the status.
  int failed = 0;
  for (const WorkerStatus& w : h.job().Workers()) failed += w.state == WorkerState::kFailed;
  EXPECT_EQ(failed, 3);
  h.Advance(kWindow - absl::Milliseconds(100));
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->exit_code, 1);
  EXPECT_EQ(h.job().outcome()->root_cause->node_id, "1");
}

TEST(JobSettleTest, ALossBelowTheMinimumFinishesWithTheLossAndSaysWhy) {
  JobHarness h(Spec(2, 2, 0));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  h.Fail("1", 1, false);
  h.Advance(absl::Seconds(1));
  std::vector<Event> out;
  h.job().NodeLost("2", "stream closed", h.now(), &out);
  ASSERT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_EQ(h.job().outcome()->exit_code, 138);
  EXPECT_EQ(h.job().outcome()->root_cause->node_id, "2");
  EXPECT_EQ(h.job().outcome()->reason,
            "node host-2 (10.0.0.2) lost: stream closed; rank 1 on host-1 failed: exit 1, 1.0 s "
            "before node host-2 was lost: judged a consequence of the loss; 1 node left, fewer "
            "than --nnodes minimum 2");
  EXPECT_EQ(SettleCond(h.job(), "Failed").reason, "NodeLost");
}

TEST(JobSettleTest, DuringTheWindowAJoinerWaitsSuccessesWaitAndAPreemptedNodeIsALoss) {
  JobHarness h(Spec(2, 4, 0));
  for (const char* id : {"1", "2", "3"}) ASSERT_TRUE(h.Join(id).ok());
  h.Advance(h.spec().last_call_timeout);
  ASSERT_EQ(h.job().participants().size(), 3u);
  h.Fail("1", 1, false);
  ASSERT_TRUE(h.Join("4").ok());
  auto waiting = h.Last("4", Event::Kind::kProgress);
  ASSERT_TRUE(waiting.has_value());
  EXPECT_NE(waiting->text.find("being judged"), std::string::npos) << waiting->text;
  std::vector<Event> out;
  h.job().WorkersSucceeded("2", 1, h.now(), &out);
  h.job().WorkersStopped("2", 0, 2000, h.now(), &out);  // another round's: ignored
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(h.job().phase(), Job::Phase::kRunning);
  ASSERT_TRUE(h.job().Preempt("3", "spot notice", h.now(), &out).ok());
  h.job().NodeLost("3", "it left", h.now(), &out);
  ASSERT_EQ(h.job().phase(), Job::Phase::kStopping);
  auto stop = std::find_if(out.begin(), out.end(), [](const Event& e) {
    return e.kind == Event::Kind::kStopWorkers && e.node_id == "2";
  });
  ASSERT_NE(stop, out.end());
  EXPECT_NE(stop->text.find("preempted: spot notice; rank 1 on host-1 failed: exit 1, 0.0 s "
                            "before node host-3 was lost: judged a consequence of the loss"),
            std::string::npos)
      << stop->text;
  h.StopAll();
  EXPECT_EQ(h.job().participants().size(), 3u);  // 1, 2 and the joiner 4
  EXPECT_EQ(h.job().restarts_used(), 0);
}

TEST(JobSettleTest, AWaitingNodeLostDoesNotExcuseTheFailure) {
  JobHarness h(Spec(2, 2, 0));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  h.Fail("1", 1, false);
  ASSERT_TRUE(h.Join("3").ok());  // waits: the round runs with its maximum
  std::vector<Event> out;
  h.job().NodeLost("3", "stream closed", h.now(), &out);
  EXPECT_TRUE(h.job().held_failure().has_value());
  h.Advance(kWindow);
  EXPECT_EQ(h.job().outcome()->exit_code, 1);
}

}  // namespace
}  // namespace muster::rdzv
