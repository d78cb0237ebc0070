// The real Agent, driven end to end over the in-process rendezvous (LocalRendezvous: the
// same core::Job that decides multi-node jobs) with a launcher whose workers end on cue.
#include "agent/lifecycle/agent.h"

#include <signal.h>
#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"
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
      if (!workers_[i].status) End(i, ExitStatus{0, sig});
    }
    loop_->Post([this] {
      state_ = State::kIdle;
      callbacks_.on_stopped();
    });
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
  void BeginShutdown() override {}
  void FinishShutdown() override {}

  std::vector<int> attempts;                     // per Start
  std::vector<std::vector<WorkerSpec>> started;  // per Start
  std::vector<int> stop_signals;                 // per Stop / Escalate
  std::function<void()> on_start;                // runs inside every Start

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
    config_.nproc_per_node = 2;
    config_.command = {"train.py"};
    config_.run_id = "agent-test";
    config_.restartable_exit_codes = DefaultRestartableExitCodes();
    config_.signals_to_handle = {SIGTERM, SIGINT};
    config_.shutdown_timeout = absl::Seconds(5);
    config_.worker_env_base = {{"PATH", "/usr/bin:/bin"}};
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
    agent_ = std::make_unique<Agent>(ResolveRunPlan(config_), std::move(parts));
    return agent_->Run();
  }

  Config config_;
  std::function<void()> on_start_;
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
  for (const WorkerView& w : launcher_->Workers()) {
    ASSERT_TRUE(w.status.has_value());
    EXPECT_EQ(w.status->signal, SIGTERM);
  }
}

TEST_F(AgentTest, SpentBudgetEndsTheJobWithTheLastFailure) {
  config_.max_restarts = 1;
  EXPECT_EQ(RunAgent({{137, kRunsUntilStopped}, {kRunsUntilStopped, 137}}), 137);
  EXPECT_EQ(launcher_->started.size(), 2u);
  EXPECT_EQ(agent_->phase(), Agent::Phase::kFailed);
}

}  // namespace
}  // namespace muster
