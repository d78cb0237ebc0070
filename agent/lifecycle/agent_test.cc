// The real Agent, driven end to end over the in-process rendezvous (LocalRendezvous: the
// same core::Job that decides multi-node jobs) with a launcher whose workers end on cue.
#include "agent/lifecycle/agent.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/diagnostics/trace_collection.h"
#include "agent/lifecycle/lease_fence.h"
#include "gtest/gtest.h"
#include "launch/restart_policy.h"
#include "launch/signals.h"
#include "rendezvous/local_client.h"

namespace muster {
namespace {

constexpr int kRunsUntilStopped = -1;

// Workers that end as a script says: per attempt, per local rank, an exit code, or
// kRunsUntilStopped. Behaves as launch/worker_group.h does: exits and the end of a stop
// are posted on the loop, running() holds from Start until a stop has finished.
class ScriptedLauncher : public WorkerLauncher {
 public:
  ScriptedLauncher(EventLoop* loop, std::vector<std::vector<int>> script)
      : loop_(loop), script_(std::move(script)) {}

  void SetCallbacks(Callbacks callbacks) override { callbacks_ = std::move(callbacks); }

  absl::Status Start(int attempt, std::vector<WorkerSpec> specs) override {
    attempts.push_back(attempt);
    started.push_back(specs);
    state_ = State::kRunning;
    workers_.clear();
    stuck_.clear();
    for (const WorkerSpec& spec : specs) {
      workers_.push_back(WorkerView{spec.placement, next_pid_++, std::nullopt});
    }
    const std::vector<int>& codes = script_.at(started.size() - 1);
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (codes.at(i) != kRunsUntilStopped) End(i, ExitStatus{codes[i], 0});
    }
    if (on_start) on_start();
    return absl::OkStatus();
  }

  absl::Status StartCommand(std::vector<std::string>, std::vector<std::string>) override {
    return absl::UnimplementedError("no debug mode here");
  }

  void Stop(int sig) override {
    stop_signals.push_back(sig);
    if (state_ != State::kRunning) {
      if (state_ == State::kIdle) loop_->Post([this] { callbacks_.on_stopped(); });
      return;
    }
    state_ = State::kStopping;
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (workers_[i].status) continue;
      if (wedge_stops) {
        // As launch/worker_group.h after the kill grace: no exit is reported, the stop ends.
        workers_[i].status = ExitStatus{0, SIGKILL};
        stuck_.push_back(StuckProcess{.pid = workers_[i].pid,
                                      .rank = workers_[i].placement.rank,
                                      .local_rank = workers_[i].placement.local_rank,
                                      .state = 'D',
                                      .wchan = "percpu_rwsem_wait"});
      } else {
        End(i, ExitStatus{0, sig});
      }
    }
    loop_->Post([this] {
      state_ = State::kIdle;
      callbacks_.on_stopped();
    });
  }

  void StopWithin(int sig, absl::Duration grace) override {
    if (state_ == State::kRunning) stop_graces.push_back(grace);
    Stop(sig);
  }
  void Escalate() override { stop_signals.push_back(SIGKILL); }
  void OnChildSignal() override {}
  std::vector<WorkerView> Workers() const override { return workers_; }
  bool running() const override { return state_ == State::kRunning; }
  bool stopping() const override { return state_ == State::kStopping; }
  bool AllSucceeded() const override {
    for (const WorkerView& w : workers_) {
      if (!w.status || !w.status->success()) return false;
    }
    return !workers_.empty();
  }
  std::vector<StuckProcess> Stuck() const override { return stuck_; }
  void BeginShutdown() override {}
  void FinishShutdown() override {}

  std::vector<int> attempts;                     // per Start
  std::vector<std::vector<WorkerSpec>> started;  // per Start
  std::vector<int> stop_signals;                 // per Stop / Escalate
  std::vector<absl::Duration> stop_graces;       // per StopWithin that began a stop
  std::function<void()> on_start;                // runs inside every Start
  // A stop's running workers survive SIGKILL (uninterruptible sleep) and are given up on.
  bool wedge_stops = false;

 private:
  enum class State { kIdle, kRunning, kStopping };

  void End(size_t i, ExitStatus status) {
    workers_[i].status = status;
    WorkerExit exit{.placement = workers_[i].placement,
                    .pid = workers_[i].pid,
                    .code = status.code(),
                    .signal = status.signal,
                    .while_stopping = state_ == State::kStopping,
                    .what = status.Describe()};
    loop_->Post([this, exit] { callbacks_.on_exit(exit); });
  }

  EventLoop* loop_;
  std::vector<std::vector<int>> script_;
  Callbacks callbacks_;
  State state_ = State::kIdle;
  std::vector<WorkerView> workers_;
  std::vector<StuckProcess> stuck_;
  pid_t next_pid_ = 1000;
};

std::string EnvValue(const WorkerSpec& spec, const std::string& name) {
  for (const std::string& kv : spec.spawn.env) {
    if (kv.starts_with(name + "=")) return kv.substr(name.size() + 1);
  }
  return "<unset>";
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A hung agent must fail the test, not the CI run's time limit.
    alarm(60);
    workers_.nproc = 2;
    config_.command = {"train.py"};
    config_.run_id = "agent-test";
    config_.restartable_exit_codes = DefaultRestartableExitCodes();
    config_.signals_to_handle = {SIGTERM, SIGINT};
    config_.shutdown_timeout = absl::Seconds(5);
    workers_.env_base = {{"PATH", "/usr/bin:/bin"}};
  }
  void TearDown() override { alarm(0); }

  // Runs a real Agent whose workers follow `script`; returns its exit code.
  int RunAgent(std::vector<std::vector<int>> script) {
    AgentParts parts;
    absl::StatusOr<UniqueFd> signal_fd = BlockAndOpenSignalFd(config_.signals_to_handle);
    EXPECT_TRUE(signal_fd.ok()) << signal_fd.status();
    parts.signal_fd = *std::move(signal_fd);
    parts.loop = *EventLoop::Create();
    auto launcher = std::make_unique<ScriptedLauncher>(parts.loop.get(), std::move(script));
    launcher_ = launcher.get();
    launcher_->on_start = on_start_;
    parts.launcher = std::move(launcher);
    parts.rendezvous = std::make_unique<rdzv::LocalRendezvous>(parts.loop.get());
    parts.store_factory = [](int port) {
      return c10d::StoreServer::Start(
          {.bind_address = "127.0.0.1", .port = static_cast<uint16_t>(port)});
    };
    agent_ = std::make_unique<Agent>(ResolveRunPlan(config_, workers_), std::move(parts));
    // The features that need no real process (the preemption notice writes into each
    // worker's directory and signals its pid: tests/integration/test_preempt.py).
    agent_->Add(std::make_unique<TraceCollection>(nullptr));
    agent_->Add(std::make_unique<LeaseFence>());
    for (std::unique_ptr<AgentComponent>& c : components_) agent_->Add(std::move(c));
    return agent_->Run();
  }

  Config config_;
  WorkerPlan workers_;  // what the resolve step would find
  std::function<void()> on_start_;
  std::vector<std::unique_ptr<AgentComponent>> components_;  // added after the real ones
  std::unique_ptr<Agent> agent_;
  ScriptedLauncher* launcher_ = nullptr;  // owned by agent_
};

TEST_F(AgentTest, EveryWorkerExitsZero) {
  EXPECT_EQ(RunAgent({{0, 0}}), 0);
  EXPECT_EQ(agent_->phase(), Agent::Phase::kSucceeded);
  ASSERT_EQ(launcher_->started.size(), 1u);
  const std::vector<WorkerSpec>& specs = launcher_->started[0];
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(EnvValue(specs[1], "RANK"), "1");
  EXPECT_EQ(EnvValue(specs[1], "WORLD_SIZE"), "2");
  EXPECT_EQ(EnvValue(specs[1], "MASTER_ADDR"), "127.0.0.1");
  EXPECT_NE(EnvValue(specs[1], "MASTER_PORT"), "0");  // the agent's own store
  EXPECT_EQ(EnvValue(specs[1], "TORCHELASTIC_RESTART_COUNT"), "0");
}

TEST_F(AgentTest, RestartableExitRestartsEveryLocalWorker) {
  config_.max_restarts = 1;
  EXPECT_EQ(RunAgent({{kRunsUntilStopped, 137}, {0, 0}}), 0);
  ASSERT_EQ(launcher_->started.size(), 2u);
  EXPECT_EQ(launcher_->attempts, (std::vector<int>{0, 1}));
  EXPECT_EQ(EnvValue(launcher_->started[1][0], "TORCHELASTIC_RESTART_COUNT"), "1");
  // The surviving rank 0 of attempt 0 was stopped with SIGTERM before the restart.
  ASSERT_FALSE(launcher_->stop_signals.empty());
  EXPECT_EQ(launcher_->stop_signals[0], SIGTERM);
  // Each attempt had a store of its own: keys of attempt 0 never reach attempt 1.
  EXPECT_NE(EnvValue(launcher_->started[0][0], "MASTER_PORT"),
            EnvValue(launcher_->started[1][0], "MASTER_PORT"));
}

TEST_F(AgentTest, RestartStopGetsTheRestartGrace) {
  // Issue 30 item 6: --restart-grace is the grace of a stop for a next round;
  // --shutdown-timeout stays the one of a stop for a signal.
  config_.max_restarts = 1;
  config_.restart_grace = absl::Seconds(2);
  EXPECT_EQ(RunAgent({{kRunsUntilStopped, 137}, {0, 0}}), 0);
  EXPECT_EQ(launcher_->stop_graces, (std::vector<absl::Duration>{absl::Seconds(2)}));
}

TEST_F(AgentTest, RestartGraceDefaultsToTheShutdownTimeout) {
  config_.max_restarts = 1;
  EXPECT_EQ(RunAgent({{kRunsUntilStopped, 137}, {0, 0}}), 0);
  EXPECT_EQ(launcher_->stop_graces, (std::vector<absl::Duration>{config_.shutdown_timeout}));
}

TEST_F(AgentTest, WorkerStuckAfterSigkillIsNamedAndTheNodeExits138) {
  // Issue 30 item 6: a worker that outlives SIGKILL (uninterruptible sleep) is named, and
  // the node starts no next round beside it: it leaves the job and exits 138 (on main it
  // restarted at once, and the job ended with the root cause's code).
  const std::string dir = ::testing::TempDir();
  const std::string error_file = dir + "/agent_stuck_error.json";
  const std::string termination_log = dir + "/agent_stuck_termination.log";
  unlink(error_file.c_str());
  workers_.env_base["TORCHELASTIC_ERROR_FILE"] = error_file;
  config_.termination_log = termination_log;
  config_.max_restarts = 3;
  on_start_ = [this] { launcher_->wedge_stops = true; };
  EXPECT_EQ(RunAgent({{kRunsUntilStopped, 1}, {0, 0}}), 138);
  EXPECT_EQ(launcher_->started.size(), 1u);  // budget left, yet no next round
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const std::string named =
      "rank 0 (local_rank 0, pid 1000): state D (uninterruptible sleep), wchan percpu_rwsem_wait";
  EXPECT_NE(read(termination_log).find(named), std::string::npos) << read(termination_log);
  EXPECT_NE(read(termination_log).find("exiting 138"), std::string::npos);
  EXPECT_NE(read(error_file).find(named), std::string::npos) << read(error_file);
}

TEST_F(AgentTest, FatalExitEndsTheJobWithItsCode) {
  config_.restart_policy = RestartPolicy::kExitCode;
  config_.max_restarts = 3;
  EXPECT_EQ(RunAgent({{1, kRunsUntilStopped}}), 1);
  EXPECT_EQ(agent_->phase(), Agent::Phase::kFailed);
  EXPECT_EQ(launcher_->started.size(), 1u);  // budget left, yet no restart
}

TEST_F(AgentTest, SigtermDuringARoundStopsTheWorkersAndExits143) {
  on_start_ = [] { kill(getpid(), SIGTERM); };  // blocked: the agent's signalfd takes it
  EXPECT_EQ(RunAgent({{kRunsUntilStopped, kRunsUntilStopped}}), 143);
  EXPECT_EQ(launcher_->started.size(), 1u);
  EXPECT_EQ(launcher_->stop_signals, std::vector<int>{SIGTERM});
  EXPECT_TRUE(launcher_->stop_graces.empty());  // --shutdown-timeout's, not --restart-grace's
  for (const WorkerView& w : launcher_->Workers()) {
    ASSERT_TRUE(w.status.has_value());
    EXPECT_EQ(w.status->signal, SIGTERM);
  }
}

// A component (agent/lifecycle/agent_component.h) that records what the agent shows it and
// holds the finish once, for a moment.
class RecordingComponent : public AgentComponent {
 public:
  absl::Status Start(AgentControl& agent) override {
    agent_ = &agent;
    return absl::OkStatus();
  }
  bool OnSignal(int sig, bool first) override {
    signals.push_back(sig);
    if (!first || take_signal == 0) return false;
    agent_->ExitAfterStop(99, "stopped by the component", take_signal);
    return true;
  }
  bool OnWorkerExit(const WorkerExit& e) override {
    exits.push_back(e.code);
    return false;
  }
  bool OnRendezvousEvent(const rdzv::Event& e) override {
    events.push_back(e.kind);
    return false;
  }
  bool HoldFinish() override {
    ++finish_asked;
    if (held) return false;
    held = true;
    agent_->loop().AddTimer(EventLoop::Now() + absl::Milliseconds(20), [this] {
      agent_->AddToSummary("held by the component");
      agent_->Finish();
    });
    return true;
  }
  void Describe(PublishedState& state) const override { phases.push_back(state.phase); }
  void BeforeJoin(rdzv::NodeInfo& node, bool first) override {
    joins.push_back({first, agent_->round()});
    if (!first || exclude_first.empty()) return;
    // Kept out of the job's rounds until the component says otherwise, 20 ms later.
    node.excluded = exclude_first;
    agent_->loop().AddTimer(EventLoop::Now() + absl::Milliseconds(20), [this] {
      workers_when_healthy = static_cast<int>(launcher_started());
      agent_->rendezvous()->ReportHealth("");
    });
  }

  std::function<size_t()> launcher_started = [] { return size_t{0}; };
  std::string exclude_first;  // nonempty: the first join is marked excluded, with this reason
  std::vector<std::pair<bool, int>> joins;  // (first, round) of each BeforeJoin
  int workers_when_healthy = -1;
  int take_signal = 0;  // nonzero: the first signal is taken; the workers get this one
  std::vector<int> signals;
  std::vector<int> exits;
  std::vector<rdzv::Event::Kind> events;
  int finish_asked = 0;
  bool held = false;
  mutable std::vector<AgentPhase> phases;

 private:
  AgentControl* agent_ = nullptr;
};

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(AgentTest, AComponentSeesTheEventsAndMayHoldTheFinish) {
  config_.termination_log = testing::TempDir() + "/agent_test_component_termination_log";
  auto component = std::make_unique<RecordingComponent>();
  RecordingComponent* seen = component.get();
  components_.push_back(std::move(component));
  EXPECT_EQ(RunAgent({{0, 0}}), 0);
  EXPECT_EQ(agent_->phase(), Agent::Phase::kSucceeded);
  EXPECT_EQ(seen->exits, (std::vector<int>{0, 0}));
  EXPECT_EQ(seen->events.front(), rdzv::Event::Kind::kRoundStarted);
  EXPECT_EQ(seen->events.back(), rdzv::Event::Kind::kFinished);
  EXPECT_TRUE(seen->signals.empty());
  // Held once, asked again when it let go.
  EXPECT_EQ(seen->finish_asked, 2);
  EXPECT_EQ(seen->phases.front(), AgentPhase::kRendezvous);
  EXPECT_EQ(seen->phases.back(), AgentPhase::kSucceeded);
  EXPECT_EQ(ReadWholeFile(config_.termination_log),
            "job succeeded: all 2 workers on 1 node exited 0; held by the component\n");
}

TEST_F(AgentTest, AComponentMayTakeTheStopOfTheFirstSignal) {
  on_start_ = [] { kill(getpid(), SIGTERM); };
  auto component = std::make_unique<RecordingComponent>();
  component->take_signal = SIGINT;
  RecordingComponent* seen = component.get();
  components_.push_back(std::move(component));
  EXPECT_EQ(RunAgent({{kRunsUntilStopped, kRunsUntilStopped}}), 99);
  EXPECT_EQ(seen->signals, std::vector<int>{SIGTERM});
  // The component's stop, not the agent's own (which forwards SIGTERM).
  EXPECT_EQ(launcher_->stop_signals, std::vector<int>{SIGINT});
}

TEST_F(AgentTest, AComponentIsAskedBeforeEveryJoinAndMayKeepTheNodeOut) {
  config_.max_restarts = 1;
  auto component = std::make_unique<RecordingComponent>();
  component->exclude_first = "sick";
  component->launcher_started = [this] { return launcher_->started.size(); };
  RecordingComponent* seen = component.get();
  components_.push_back(std::move(component));
  EXPECT_EQ(RunAgent({{1, kRunsUntilStopped}, {0, 0}}), 0);
  // The excluded join formed no round: nothing had started when the node turned healthy.
  EXPECT_EQ(seen->workers_when_healthy, 0);
  EXPECT_EQ(launcher_->started.size(), 2u);
  // Before the join, then before the stop report of round 1.
  EXPECT_EQ(seen->joins, (std::vector<std::pair<bool, int>>{{true, 0}, {false, 1}}));
}

TEST_F(AgentTest, SpentBudgetEndsTheJobWithTheLastFailure) {
  config_.max_restarts = 1;
  EXPECT_EQ(RunAgent({{137, kRunsUntilStopped}, {kRunsUntilStopped, 137}}), 137);
  EXPECT_EQ(launcher_->started.size(), 2u);
  EXPECT_EQ(agent_->phase(), Agent::Phase::kFailed);
}

}  // namespace
}  // namespace muster
