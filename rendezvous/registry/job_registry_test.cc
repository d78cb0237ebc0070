#include "rendezvous/registry/job_registry.h"

#include <atomic>
#include <memory>

#include "base/mutex.h"
#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

class RecordingStream : public NodeStream {
 public:
  void Enqueue(const Event& event) override { queued_.push_back(event); }
  void Flush() override {
    MutexLock lock(&mu_);
    for (Event& e : queued_) flushed_.push_back(std::move(e));
    queued_.clear();
  }
  void Close(const absl::Status& why) override {
    MutexLock lock(&mu_);
    closed_ = std::string(why.message());
  }
  std::vector<Event> flushed() {
    MutexLock lock(&mu_);
    return flushed_;
  }
  std::string closed() {
    MutexLock lock(&mu_);
    return closed_;
  }

 private:
  std::string closed_;
  std::vector<Event> queued_;  // under the registry's mutex
  Mutex mu_;
  std::vector<Event> flushed_;
};

NodeInfo Node(const std::string& id, int rank_hint = -1) {
  NodeInfo n;
  n.node_id = id;
  n.host = "host-" + id;
  n.address = "10.0.0.1";
  n.rank_hint = rank_hint;
  n.store_port = 100;
  return n;
}

JobSpec Spec(int nodes) {
  JobSpec s;
  s.run_id = "r";
  s.min_nodes = s.max_nodes = nodes;
  return s;
}

bool Has(const std::vector<Event>& events, Event::Kind kind) {
  for (const Event& e : events) {
    if (e.kind == kind) return true;
  }
  return false;
}

TEST(JobRegistryTest, RoutesEventsToTheirNodes) {
  JobRegistry registry("");
  auto a = std::make_shared<RecordingStream>();
  auto b = std::make_shared<RecordingStream>();
  ASSERT_TRUE(registry.Join(a, Node("a"), Spec(2)).ok());
  EXPECT_TRUE(Has(a->flushed(), Event::Kind::kProgress));
  ASSERT_TRUE(registry.Join(b, Node("b"), Spec(2)).ok());
  EXPECT_TRUE(Has(a->flushed(), Event::Kind::kRoundStarted));
  EXPECT_TRUE(Has(b->flushed(), Event::Kind::kRoundStarted));
  for (const Event& e : b->flushed()) EXPECT_EQ(e.node_id, "b");

  registry.NodeLost("b", "stream closed");
  EXPECT_TRUE(Has(a->flushed(), Event::Kind::kFinished));
  JobStatusSnapshot s = registry.Status("r").value();
  EXPECT_EQ(s.phase, JobPhase::kFailed);
  EXPECT_EQ(s.outcome->exit_code, 138);
}

TEST(JobRegistryTest, RefusesOtherRunIdsAndKeepsNoJobForAFailedFirstJoin) {
  JobRegistry registry("wanted");
  auto a = std::make_shared<RecordingStream>();
  absl::Status s = registry.Join(a, Node("a"), Spec(1));
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("'wanted'"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("'r'"), absl::string_view::npos) << s;

  JobRegistry open("");
  NodeInfo bad = Node("a");
  bad.local_world_size = 0;
  EXPECT_FALSE(open.Join(a, bad, Spec(1)).ok());
  EXPECT_TRUE(absl::IsNotFound(open.Status("r").status()));
}

TEST(JobRegistryTest, TimerThreadFiresTheJoinTimeout) {
  JobRegistry registry("");
  auto a = std::make_shared<RecordingStream>();
  JobSpec spec = Spec(2);
  spec.join_timeout = absl::Milliseconds(100);
  ASSERT_TRUE(registry.Join(a, Node("a"), spec).ok());
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!Has(a->flushed(), Event::Kind::kFinished) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(Has(a->flushed(), Event::Kind::kFinished));
  EXPECT_EQ(registry.Status("r")->outcome->exit_code, 138);
}

TEST(JobRegistryTest, AJobThatEndedWith138StartsAfreshOnTheNextJoin) {
  JobRegistry registry("");
  auto a = std::make_shared<RecordingStream>();
  ASSERT_TRUE(registry.Join(a, Node("a"), Spec(1)).ok());
  registry.NodeLost("a", "stream closed");  // the only participant: 138
  ASSERT_EQ(registry.Status("r")->outcome->exit_code, 138);
  auto b = std::make_shared<RecordingStream>();
  ASSERT_TRUE(registry.Join(b, Node("b"), Spec(1)).ok());
  JobStatusSnapshot s = registry.Status("r").value();
  EXPECT_EQ(s.phase, JobPhase::kRunning);
  EXPECT_EQ(s.round, 1);
  EXPECT_FALSE(s.outcome.has_value());
  EXPECT_TRUE(Has(b->flushed(), Event::Kind::kRoundStarted));
}

TEST(JobRegistryTest, ForgetsAJobOnceNoAgentOfItWasConnectedForTheRetention) {
  // Issue 31 item 7: `muster serve` kept every job, finished or abandoned, forever.
  constexpr absl::Duration kRetention = absl::Milliseconds(200);
  JobRegistry registry("", absl::Seconds(5), 3, kRetention);
  auto waiting = [](const std::string& run_id, const std::string& node) {
    JobSpec spec = Spec(2);  // one node of two: waits, and is abandoned
    spec.run_id = run_id;
    return std::make_pair(spec, Node(node));
  };
  auto [abandoned_spec, abandoned_node] = waiting("abandoned", "x");
  ASSERT_TRUE(
      registry.Join(std::make_shared<RecordingStream>(), abandoned_node, abandoned_spec).ok());
  auto [kept_spec, kept_node] = waiting("kept", "k");
  ASSERT_TRUE(registry.Join(std::make_shared<RecordingStream>(), kept_node, kept_spec).ok());
  ASSERT_TRUE(registry.Join(std::make_shared<RecordingStream>(), Node("f"), Spec(1)).ok());
  registry.NodeLost("f", "stream closed");  // job r finished; its agent hung up
  registry.NodeLost("x", "stream closed");
  EXPECT_TRUE(registry.Status("r").ok());  // not before the retention
  EXPECT_TRUE(registry.Status("abandoned").ok());
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  while ((registry.Status("r").ok() || registry.Status("abandoned").ok()) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(absl::IsNotFound(registry.Status("r").status()));
  EXPECT_TRUE(absl::IsNotFound(registry.Status("abandoned").status()));
  // A job with an agent connected stays, however long.
  absl::SleepFor(kRetention);
  EXPECT_TRUE(registry.Status("kept").ok());
  EXPECT_EQ(registry.Summaries().size(), 1u);
}

class CountingWatcher : public StatusWatcher {
 public:
  void Poke() override { ++pokes; }
  std::atomic<int> pokes{0};
};

TEST(JobRegistryTest, WatchersHearChangesButNotHeartbeats) {
  JobRegistry registry("");
  auto watcher = std::make_shared<CountingWatcher>();
  registry.AddWatcher(watcher);
  auto a = std::make_shared<RecordingStream>();
  ASSERT_TRUE(registry.Join(a, Node("a"), Spec(1)).ok());
  int after_join = watcher->pokes;
  EXPECT_GE(after_join, 1);
  // Heartbeats change nothing a watcher shows: at 1024 agents they would otherwise rebuild
  // every watcher's status 1024 times a second.
  for (int i = 0; i < 100; ++i) registry.Heartbeat("a");
  EXPECT_EQ(watcher->pokes, after_join);
  registry.WorkersStarted("a", 1, {{.local_rank = 0, .rank = 0, .pid = 4242}});
  EXPECT_EQ(watcher->pokes, after_join + 1);
  JobStatusSnapshot s = registry.Status("r").value();
  ASSERT_EQ(s.workers.size(), 1u);
  EXPECT_EQ(s.workers[0].pid, 4242);
  EXPECT_EQ(s.workers[0].state, WorkerState::kRunning);
  EXPECT_EQ(s.nodes[0].state, NodeState::kRunning);
  EXPECT_GT(s.nodes[0].last_heartbeat, absl::Now() - absl::Seconds(10));
  registry.WorkerEnded("a", 1,
                       EndedWorker{.local_rank = 0,
                                   .pid = 4242,
                                   .code = 0,
                                   .signal = 0,
                                   .what = "exit 0",
                                   .stopped = false});
  registry.WorkersSucceeded("a", 1);
  s = registry.Status("r").value();
  EXPECT_EQ(s.phase, JobPhase::kSucceeded);
  EXPECT_EQ(s.workers[0].state, WorkerState::kSucceeded);
  // The agent hangs up after the outcome; the final status still shows it and its worker.
  registry.NodeLost("a", "stream closed");
  s = registry.Status("r").value();
  ASSERT_EQ(s.nodes.size(), 1u);
  EXPECT_EQ(s.nodes[0].state, NodeState::kLeft);
  EXPECT_EQ(s.workers.size(), 1u);
  ASSERT_EQ(s.conditions.size(), 5u);
  EXPECT_EQ(s.conditions[3].type, "Succeeded");
  EXPECT_TRUE(s.conditions[3].status);
}

class CountingObserver : public RegistryObserver {
 public:
  void OnJoin() override { ++joins; }
  void OnRoundStarted(absl::Duration formed_in) override {
    ++rounds;
    last_formed_in = formed_in;
  }
  int joins = 0;
  int rounds = 0;
  absl::Duration last_formed_in = absl::InfiniteDuration();
};

TEST(JobRegistryTest, TellsTheObserverOfJoinsAndRoundsAndCountsByState) {
  JobRegistry registry("");
  auto observer = std::make_shared<CountingObserver>();
  registry.SetObserver(observer);
  auto a = std::make_shared<RecordingStream>();
  auto b = std::make_shared<RecordingStream>();
  JobSpec spec = Spec(2);
  spec.max_restarts = 3;
  ASSERT_TRUE(registry.Join(a, Node("a"), spec).ok());
  EXPECT_EQ(observer->joins, 1);
  EXPECT_EQ(observer->rounds, 0);
  RegistryCounts gathering = registry.Counts();
  EXPECT_EQ(gathering.jobs_by_phase[JobPhase::kPending], 1);
  EXPECT_EQ(gathering.nodes_by_state[NodeState::kWaiting], 1);
  ASSERT_TRUE(registry.Join(b, Node("b"), spec).ok());
  EXPECT_EQ(observer->joins, 2);
  EXPECT_EQ(observer->rounds, 1);
  EXPECT_GE(observer->last_formed_in, absl::ZeroDuration());
  EXPECT_LT(observer->last_formed_in, absl::Seconds(10));
  RegistryCounts running = registry.Counts();
  EXPECT_EQ(running.jobs_by_phase[JobPhase::kRunning], 1);
  EXPECT_EQ(running.nodes_by_state[NodeState::kRunning], 2);

  // A restart: both nodes report stopped, the next round forms.
  registry.WorkerFailed("a", 1,
                        Failure{.node_id = "a", .rank = 0, .code = 137, .restartable = true});
  registry.WorkersStopped("a", 1, 101);
  registry.WorkersStopped("b", 1, 102);
  EXPECT_EQ(observer->rounds, 2);
  EXPECT_EQ(observer->joins, 2);  // a restart is no join
}

}  // namespace
}  // namespace muster::rdzv
