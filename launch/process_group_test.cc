#include "launch/process_group.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <map>
#include <string>

#include "base/unique_fd.h"
#include "gtest/gtest.h"
#include "launch/cgroup.h"
#include "launch/exit_status.h"
#include "launch/process_tree.h"
#include "launch/reaper.h"

namespace muster {
namespace {

// A ProcessGroup on a real loop, with SIGCHLD read from a signalfd and the test process a
// child subreaper, as in the agent.
class ProcessGroupTest : public ::testing::Test {
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
    if (UseCgroup()) {
      absl::StatusOr<std::unique_ptr<JobCgroup>> cg = JobCgroup::Create();
      if (!cg.ok()) GTEST_SKIP() << "SKIPPED LOUDLY: no cgroup can be made here: " << cg.status();
      cgroup_ = *std::move(cg);
    }
    watchdog_ = *Watchdog::Start(cgroup_ ? cgroup_->path() : "");
    group_ = std::make_unique<ProcessGroup>(
        loop_.get(), watchdog_.get(), absl::Milliseconds(300),
        [this](const std::vector<pid_t>& abandoned) {
          ++stopped_;
          abandoned_ = abandoned;
        },
        cgroup_.get());
    ASSERT_TRUE(loop_->Add(signal_fd_.get(), EPOLLIN, [this](uint32_t) { OnSigchld(); }).ok());
    if (cgroup_) {
      ASSERT_TRUE(loop_
                      ->Add(cgroup_->wait_fd(), EPOLLIN,
                            [this](uint32_t) {
                              cgroup_->ConsumeWaitEvents();
                              group_->OnReaped();
                            })
                      .ok());
    }
  }

  virtual bool UseCgroup() const { return false; }

  void TearDown() override {
    if (!loop_ || !group_) return;
    if (cgroup_) loop_->Remove(cgroup_->wait_fd());
    loop_->Remove(signal_fd_.get());
    group_.reset();
    watchdog_->Disarm();
  }

  void OnSigchld() {
    signalfd_siginfo info;
    while (read(signal_fd_.get(), &info, sizeof(info)) == sizeof(info)) {
    }
    ReapExitedChildren([this](pid_t pid, int wstatus) {
      if (group_->OnChildExited(pid)) exits_[pid] = ExitStatus::FromWaitStatus(wstatus);
    });
    group_->OnReaped();
  }

  // Runs the loop until `done` or 10 s.
  bool RunUntil(const std::function<bool()>& done) {
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!done()) {
      if (absl::Now() > deadline) return false;
      EXPECT_TRUE(loop_->RunOnce(absl::Milliseconds(100)).ok());
    }
    return true;
  }

  pid_t SpawnShell(const std::string& script) {
    absl::StatusOr<pid_t> pid =
        group_->Spawn(SpawnSpec{.argv = {"/bin/sh", "-c", script}, .env = {"PATH=/usr/bin:/bin"}});
    EXPECT_TRUE(pid.ok()) << pid.status();
    return pid.ok() ? *pid : 0;
  }

  UniqueFd signal_fd_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<JobCgroup> cgroup_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<ProcessGroup> group_;
  std::map<pid_t, ExitStatus> exits_;
  int stopped_ = 0;
  std::vector<pid_t> abandoned_;
};

TEST_F(ProcessGroupTest, StopSignalsEveryMemberThenReportsStopped) {
  ASSERT_TRUE(group_->Begin().ok());
  pid_t a = SpawnShell("exec sleep 30"), b = SpawnShell("exec sleep 30");
  EXPECT_TRUE(group_->running());
  absl::Time t0 = absl::Now();
  group_->Stop(SIGTERM);
  EXPECT_TRUE(group_->stopping());
  ASSERT_TRUE(RunUntil([&] { return stopped_ == 1; }));
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(300));  // no escalation was needed
  EXPECT_EQ(exits_[a].signal, SIGTERM);
  EXPECT_EQ(exits_[b].signal, SIGTERM);
  EXPECT_TRUE(abandoned_.empty());
  EXPECT_FALSE(group_->running());
  EXPECT_FALSE(group_->stopping());
}

TEST_F(ProcessGroupTest, EscalatesToSigkillAfterTheShutdownTimeout) {
  std::string ready = testing::TempDir() + "/ignores-term";
  unlink(ready.c_str());
  ASSERT_TRUE(group_->Begin().ok());
  // Ignored SIGTERM is inherited by the sleeps too: only SIGKILL ends this member.
  pid_t p = SpawnShell("trap '' TERM; touch " + ready + "; while :; do sleep 0.05; done");
  ASSERT_TRUE(RunUntil([&] { return access(ready.c_str(), F_OK) == 0; }));
  absl::Time t0 = absl::Now();
  group_->Stop(SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return stopped_ == 1; }));
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(300));
  EXPECT_EQ(exits_[p].signal, SIGKILL);
}

TEST_F(ProcessGroupTest, DaemonsTheSubreaperAdoptedAreStoppedToo) {
  std::string pid_file = testing::TempDir() + "/daemon.pid";
  unlink(pid_file.c_str());
  ASSERT_TRUE(group_->Begin().ok());
  // A double-forked daemon in its own session: neither the member's process group nor its
  // session holds it, only the subreaper's children do.
  SpawnShell("(setsid sh -c 'echo $$ > " + pid_file + ".tmp; mv " + pid_file + ".tmp " + pid_file +
             "; exec sleep 30' &); exec sleep 30");
  pid_t daemon = 0;
  ASSERT_TRUE(RunUntil([&] {
    std::ifstream in(pid_file);
    return static_cast<bool>(in >> daemon);
  }));
  ASSERT_EQ(kill(daemon, 0), 0);
  group_->Stop(SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return stopped_ == 1; }));
  EXPECT_EQ(kill(daemon, 0), -1);  // stopped and reaped: not even a zombie is left
  EXPECT_EQ(errno, ESRCH);
}

// Mode cgroup: the same daemon, and a TERM-ignoring one that only cgroup.kill ends.
class ProcessGroupCgroupTest : public ProcessGroupTest {
 protected:
  bool UseCgroup() const override { return true; }
};

TEST_F(ProcessGroupCgroupTest, DaemonsAreStoppedThroughTheCgroup) {
  std::string pid_file = testing::TempDir() + "/daemon.pid";
  unlink(pid_file.c_str());
  ASSERT_TRUE(group_->Begin().ok());
  // A double-forked daemon in its own session: neither the member's process group nor its
  // session holds it, only the subreaper's children do.
  SpawnShell("(setsid sh -c 'echo $$ > " + pid_file + ".tmp; mv " + pid_file + ".tmp " + pid_file +
             "; exec sleep 30' &); exec sleep 30");
  pid_t daemon = 0;
  ASSERT_TRUE(RunUntil([&] {
    std::ifstream in(pid_file);
    return static_cast<bool>(in >> daemon);
  }));
  ASSERT_EQ(kill(daemon, 0), 0);
  group_->Stop(SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return stopped_ == 1; }));
  EXPECT_EQ(kill(daemon, 0), -1);  // stopped and reaped: not even a zombie is left
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(ProcessGroupCgroupTest, EscalationKillsTheWholeCgroupAndRemovesTheLeaf) {
  std::string ready = testing::TempDir() + "/cg-ignores-term";
  unlink(ready.c_str());
  ASSERT_TRUE(group_->Begin().ok());
  std::string leaf = cgroup_->leaf();
  SpawnShell("trap '' TERM; (setsid sh -c 'trap \"\" TERM; sleep 30' &); touch " + ready +
             "; while :; do sleep 0.05; done");
  ASSERT_TRUE(RunUntil([&] { return access(ready.c_str(), F_OK) == 0; }));
  group_->Stop(SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return stopped_ == 1; }));
  EXPECT_FALSE(cgroup_->Populated());
  EXPECT_NE(access(leaf.c_str(), F_OK), 0) << leaf << " not removed";
}

TEST_F(ProcessGroupCgroupTest, StopSignalsEveryMemberThenReportsStopped) {
  ASSERT_TRUE(group_->Begin().ok());
  pid_t a = SpawnShell("exec sleep 30"), b = SpawnShell("exec sleep 30");
  EXPECT_TRUE(group_->running());
  absl::Time t0 = absl::Now();
  group_->Stop(SIGTERM);
  EXPECT_TRUE(group_->stopping());
  ASSERT_TRUE(RunUntil([&] { return stopped_ == 1; }));
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(300));  // no escalation was needed
  EXPECT_EQ(exits_[a].signal, SIGTERM);
  EXPECT_EQ(exits_[b].signal, SIGTERM);
  EXPECT_TRUE(abandoned_.empty());
  EXPECT_FALSE(group_->running());
  EXPECT_FALSE(group_->stopping());
}

TEST_F(ProcessGroupTest, StopWhileIdleReportsStoppedOnce) {
  group_->Stop(SIGTERM);
  ASSERT_TRUE(RunUntil([&] { return stopped_ == 1; }));
  EXPECT_TRUE(loop_->RunOnce(absl::Milliseconds(50)).ok());
  EXPECT_EQ(stopped_, 1);
}

TEST_F(ProcessGroupTest, OnlyLiveMembersAreClaimed) {
  ASSERT_TRUE(group_->Begin().ok());
  pid_t p = SpawnShell("exit 3");
  ASSERT_TRUE(RunUntil([&] { return exits_.count(p) == 1; }));
  EXPECT_EQ(exits_[p].code(), 3);
  EXPECT_FALSE(group_->OnChildExited(p));  // reaped once already
  EXPECT_FALSE(group_->OnChildExited(getpid() + 100000));
  EXPECT_TRUE(group_->running());  // a member's exit alone does not stop the group
}

}  // namespace
}  // namespace muster
