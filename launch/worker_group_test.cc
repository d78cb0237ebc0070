#include "launch/worker_group.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "gtest/gtest.h"
#include "launch/pidfd.h"
#include "launch/process_tree.h"
#include "launch/worker_source.h"

namespace muster {
namespace {

// A source that does not exec: it forks a child that writes a line to stdout and one to
// stderr, then exits with `code` (or waits for a signal when `code` < 0). Only
// async-signal-safe calls in the child (the test process has the console writer's thread).
// It contains the child as the spawn child does in session mode: own session, PDEATHSIG,
// reported to the watchdog.
class ForkSource : public WorkerSource {
 public:
  explicit ForkSource(int code) : code_(code) {}

  absl::StatusOr<Started> Start(const SpawnSpec& spec, const WorkerContainment& containment,
                                int stdout_fd, int stderr_fd) override {
    (void)spec;  // the function below is the worker
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return absl::UnavailableError("fork");
    if (pid == 0) {
      setsid();
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      if (containment.report_fd >= 0) {
        int self = PidfdOpen(getpid());
        SendPidAndPidfd(containment.report_fd, '+', getpid(), self);
      }
      dup2(stdout_fd, 1);
      dup2(stderr_fd, 2);
      const char out[] = "forked, not exec'd\n", err[] = "oops\n";
      if (write(1, out, sizeof out - 1) < 0 || write(2, err, sizeof err - 1) < 0) _exit(2);
      if (code_ < 0) pause();
      _exit(code_);
    }
    return Started{.pid = pid, .pidfd = UniqueFd(PidfdOpen(pid))};
  }

 private:
  int code_;
};

// A WorkerGroup (session containment) on a real loop, SIGCHLD from a signalfd.
class WorkerGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    ASSERT_EQ(sigprocmask(SIG_BLOCK, &set, nullptr), 0);
    signal_fd_.reset(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
    ASSERT_TRUE(signal_fd_.valid());
    ASSERT_TRUE(BecomeSubreaper().ok());
    loop_ = *EventLoop::Create();
    ASSERT_TRUE(loop_
                    ->Add(signal_fd_.get(), EPOLLIN,
                          [this](uint32_t) {
                            signalfd_siginfo info;
                            while (read(signal_fd_.get(), &info, sizeof(info)) == sizeof(info)) {
                            }
                            group_->OnChildSignal();
                          })
                    .ok());
  }

  void TearDown() override {
    if (!loop_) return;
    loop_->Remove(signal_fd_.get());
    if (group_) {
      group_->BeginShutdown();
      group_->FinishShutdown();
    }
    group_.reset();
  }

  void Create(int code) {
    ContainmentChoice session{.description = "session (test)"};
    absl::StatusOr<std::unique_ptr<WorkerGroup>> group = WorkerGroup::Create(
        loop_.get(), absl::Seconds(5), std::move(session), std::make_unique<ForkSource>(code));
    ASSERT_TRUE(group.ok()) << group.status();
    group_ = *std::move(group);
    group_->SetCallbacks(
        WorkerLauncher::Callbacks{.on_exit = [this](const WorkerExit& e) { exit_ = e; },
                                  .on_stopped = [this] { stopped_ = true; }});
  }

  WorkerSpec Spec() {
    WorkerSpec spec;
    spec.placement.rank = 3;
    spec.dir = testing::TempDir() + "/worker_group_test/attempt_0/0";
    spec.error_file = spec.dir + "/error.json";
    spec.output_prefix = "[default3]:";
    spec.out = StreamOptions{.to_console = false, .file = spec.dir + "/stdout.log"};
    spec.err = StreamOptions{.to_console = false, .file = spec.dir + "/stderr.log"};
    return spec;
  }

  bool RunUntil(const std::function<bool()>& done) {
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!done()) {
      if (absl::Now() > deadline) return false;
      EXPECT_TRUE(loop_->RunOnce(absl::Milliseconds(100)).ok());
    }
    return true;
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  UniqueFd signal_fd_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<WorkerGroup> group_;
  std::optional<WorkerExit> exit_;
  bool stopped_ = false;
};

TEST_F(WorkerGroupTest, AWorkerFromAnotherSourceIsSupervisedAsAnExecdOne) {
  Create(7);
  std::vector<WorkerSpec> specs = {Spec()};
  WorkerSpec spec = specs[0];
  ASSERT_TRUE(group_->Start(0, std::move(specs)).ok());
  ASSERT_TRUE(RunUntil([&] { return exit_.has_value(); }));
  // Its exit status from the agent's reap, its stderr's tail for the report.
  EXPECT_EQ(exit_->code, 7);
  EXPECT_EQ(exit_->placement.rank, 3);
  EXPECT_EQ(exit_->what, "exit 7");
  EXPECT_EQ(exit_->stderr_tail, "oops");
  EXPECT_GT(exit_->pid, 0);
  ASSERT_EQ(group_->Workers().size(), 1u);
  EXPECT_EQ(group_->Workers()[0].pid, exit_->pid);
  group_->Stop(SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return stopped_; }));
  // Its output in the per-rank files, as an exec'd worker's.
  EXPECT_EQ(Read(spec.out.file), "forked, not exec'd\n");
  EXPECT_EQ(Read(spec.err.file), "oops\n");
}

TEST_F(WorkerGroupTest, AnAdoptedWorkerIsSignalledAndStoppedWithTheAttempt) {
  Create(-1);
  ASSERT_TRUE(group_->Start(0, {Spec()}).ok());
  // Once its line is in the file, it waits in pause().
  std::string out = Spec().out.file;
  ASSERT_TRUE(RunUntil([&] { return Read(out) == "forked, not exec'd\n"; }));
  EXPECT_TRUE(group_->running());
  group_->Stop(SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return stopped_; }));
  ASSERT_TRUE(exit_.has_value());
  EXPECT_EQ(exit_->signal, SIGTERM);
  EXPECT_TRUE(exit_->while_stopping);
  ASSERT_TRUE(group_->Workers()[0].status.has_value());
  EXPECT_EQ(group_->Workers()[0].status->code(), 128 + SIGTERM);
}

}  // namespace
}  // namespace muster
