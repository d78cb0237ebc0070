#include "rendezvous/core/job.h"

#include <map>

#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

// Drives a Job with a fake clock and collects the events per node.
class JobHarness {
 public:
  explicit JobHarness(JobSpec spec) : spec_(spec), job_(spec, now_) {}

  absl::Status Join(const std::string& id, int hint = -1, int local = 2, int port = 0) {
    NodeInfo n{id, "host-" + id, "10.0.0." + id, hint, local, port ? port : 1000 + Num(id)};
    return job_.Join(n, spec_, now_, &events_);
  }
  void Advance(absl::Duration d) {
    now_ += d;
    job_.Tick(now_, &events_);
  }
  void Fail(const std::string& id, int code, bool restartable) {
    Failure f{id, "host-" + id, 1, 1, 42, code, "exit " + std::to_string(code), "", restartable};
    job_.WorkerFailed(id, job_.round(), f, now_, &events_);
  }
  void StopAll(int port_offset = 100) {
    for (const NodeInfo& p : std::vector<NodeInfo>(job_.participants())) {
      job_.WorkersStopped(p.node_id, job_.round(), 1000 + Num(p.node_id) + port_offset, now_,
                          &events_);
    }
  }
  // Events for `id` since the last call, then forgets them.
  std::vector<Event> Take(const std::string& id) {
    std::vector<Event> mine, rest;
    for (Event& e : events_) (e.node_id == id ? mine : rest).push_back(std::move(e));
    events_ = std::move(rest);
    return mine;
  }
  std::optional<Event> Last(const std::string& id, Event::Kind kind) {
    std::optional<Event> found;
    for (Event& e : Take(id)) {
      if (e.kind == kind) found = e;
    }
    return found;
  }
  Job& job() { return job_; }
  absl::Time now() const { return now_; }
  const JobSpec& spec() const { return spec_; }

 private:
  static int Num(const std::string& id) { return std::stoi(id); }
  absl::Time now_ = absl::FromUnixSeconds(1000);
  JobSpec spec_;
  Job job_;
  std::vector<Event> events_;
};

JobSpec Spec(int min, int max, int restarts = 0) {
  JobSpec s;
  s.run_id = "job";
  s.min_nodes = min;
  s.max_nodes = max;
  s.max_restarts = restarts;
  s.heartbeat_interval = absl::Seconds(1);
  s.heartbeat_misses = 3;
  return s;
}

TEST(JobTest, RoundFormsAtMaxWithRanksInArrivalOrder) {
  JobHarness h(Spec(3, 3));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  // Every waiting node hears each join, not only the joiner.
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

TEST(JobTest, MismatchedSpecIsRefusedNamingTheFlag) {
  JobHarness h(Spec(2, 2));
  JobSpec other = Spec(2, 3);
  NodeInfo n{"9", "h9", "a9", -1, 1, 1};
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
  JobSpec s = Spec(2, 4);
  s.heartbeat_interval = absl::Seconds(100);
  JobHarness h(s);
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
  for (const char* id : {"1", "2", "3"}) {
    auto f = h.Last(id, Event::Kind::kFinished);
    ASSERT_TRUE(f.has_value()) << id;
    EXPECT_EQ(f->outcome.exit_code, 137);
    EXPECT_EQ(f->outcome.root_cause->node_id, "3");
    EXPECT_NE(f->outcome.reason.find("restart budget spent (1 of 1"), std::string::npos)
        << f->outcome.reason;
  }
}

TEST(JobTest, FatalFailureEndsTheJobAtOnce) {
  JobHarness h(Spec(2, 2, 5));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  h.Fail("1", 1, false);
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
  EXPECT_NE(h.job().outcome()->reason.find("host-3"), std::string::npos);
  EXPECT_NE(h.job().outcome()->reason.find("minimum 2"), std::string::npos);
}

TEST(JobTest, MissedHeartbeatsMarkNodeLostAfterIntervalTimesMisses) {
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  for (int i = 0; i < 5; ++i) {
    h.Advance(absl::Milliseconds(900));
    h.job().Heartbeat("1", h.now());
  }
  // Node 2 last spoke 4.5 s ago: lost once 3 s had passed.
  EXPECT_EQ(h.job().phase(), Job::Phase::kFinished);
  EXPECT_NE(h.job().outcome()->reason.find("no heartbeat"), std::string::npos);
  EXPECT_EQ(h.job().NextDeadline(), std::nullopt);
}

TEST(JobTest, NextDeadlineIsTheEarliestPendingOne) {
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("1").ok());
  EXPECT_EQ(*h.job().NextDeadline(), h.now() + absl::Seconds(3));  // heartbeat
  h.job().Heartbeat("1", h.now() + absl::Seconds(2));
  EXPECT_EQ(*h.job().NextDeadline(), h.now() + absl::Seconds(5));
}

TEST(JobTest, JoinTimeoutFails138) {
  JobSpec s = Spec(2, 2);
  s.heartbeat_interval = absl::Seconds(1000);
  JobHarness h(s);
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
  s.heartbeat_interval = absl::Seconds(1000);
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

}  // namespace
}  // namespace muster::rdzv
