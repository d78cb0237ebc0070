#include "launch/process_group.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "absl/strings/str_join.h"
#include "base/duration.h"
#include "base/log_format.h"
#include "base/status_macros.h"
#include "launch/pidfd.h"
#include "launch/process_tree.h"
#include "launch/stuck_process.h"
#include "spdlog/spdlog.h"

namespace muster {

ProcessGroup::ProcessGroup(EventLoop* loop, Watchdog* watchdog, absl::Duration shutdown_timeout,
                           StoppedCallback on_stopped, JobCgroup* cgroup)
    : loop_(loop),
      watchdog_(watchdog),
      cgroup_(cgroup),
      shutdown_timeout_(shutdown_timeout),
      on_stopped_(std::move(on_stopped)) {}

ProcessGroup::~ProcessGroup() {
  if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  if (kill_timer_ != 0) loop_->CancelTimer(kill_timer_);
}

absl::Status ProcessGroup::Begin() {
  if (cgroup_ != nullptr) RETURN_IF_ERROR(cgroup_->BeginAttempt());
  state_ = State::kRunning;
  members_.clear();
  live_.clear();
  return absl::OkStatus();
}

WorkerContainment ProcessGroup::containment() const {
  WorkerContainment c;
  if (cgroup_ != nullptr) {
    c.cgroup_procs_fd = cgroup_->procs_fd();
    c.cgroup_dir_fd = cgroup_->dir_fd();
    c.new_cgroup_namespace = cgroup_->namespaced();
  } else {
    c.report_fd = watchdog_->report_fd();
    c.mark = watchdog_->mark();
  }
  return c;
}

void ProcessGroup::Adopt(pid_t pid, UniqueFd pidfd) {
  // It reported itself to the watchdog before running any of the job's code.
  if (cgroup_ == nullptr) watchdog_->CheckBacklog();
  members_.push_back(pid);
  live_.push_back(Member{pid, std::move(pidfd)});
}

absl::StatusOr<pid_t> ProcessGroup::Spawn(const SpawnSpec& spec) {
  ExecSource exec;
  absl::StatusOr<WorkerSource::Started> started = exec.Start(spec, containment(), -1, -1);
  if (!started.ok()) return started.status();
  Adopt(started->pid, std::move(started->pidfd));
  return started->pid;
}

bool ProcessGroup::IsLive(pid_t pid) const {
  return std::any_of(live_.begin(), live_.end(), [pid](const Member& m) { return m.pid == pid; });
}

bool ProcessGroup::OnChildExited(pid_t pid) {
  auto it =
      std::find_if(live_.begin(), live_.end(), [pid](const Member& m) { return m.pid == pid; });
  if (it == live_.end()) return false;
  live_.erase(it);
  // Reaped: its number is free for anyone now, so the watchdog must forget it at once.
  if (cgroup_ == nullptr) watchdog_->Untrack({pid});
  return true;
}

void ProcessGroup::TrackAgain() {
  if (cgroup_ != nullptr) return;  // the new watchdog kills the job cgroup
  for (const Member& m : live_) {
    if (m.pidfd.valid()) watchdog_->Track(m.pid, m.pidfd.get());
  }
}

void ProcessGroup::OnReaped() {
  if (state_ == State::kStopping) MaybeFinishStop();
}

void ProcessGroup::Stop(int sig, absl::Duration grace) {
  if (state_ == State::kIdle) {
    loop_->Post([cb = on_stopped_] { cb({}); });
    return;
  }
  if (state_ == State::kStopping) {
    // A signal to the agent while a failure is being handled: forward it as well.
    if (sig != stop_signal_ && stop_signal_ != SIGKILL) SignalLeftovers(sig);
    return;
  }
  state_ = State::kStopping;
  stop_signal_ = sig;
  stop_started_ = EventLoop::Now();
  SignalLeftovers(sig);
  stop_timer_ = loop_->AddTimer(stop_started_ + grace, [this] {
    stop_timer_ = 0;
    Escalate();
  });
  MaybeFinishStop();
}

void ProcessGroup::Escalate() {
  if (state_ != State::kStopping || stop_signal_ == SIGKILL) return;
  if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  stop_timer_ = 0;
  spdlog::info("sending SIGKILL to what is left of the workers after {}",
               HumanDuration(EventLoop::Now() - stop_started_));
  stop_signal_ = SIGKILL;
  SignalLeftovers(SIGKILL);
  kill_timer_ = loop_->AddTimer(EventLoop::Now() + kKillGrace, [this] {
    kill_timer_ = 0;
    GiveUp();
  });
  MaybeFinishStop();
}

void ProcessGroup::GiveUp() {
  if (state_ != State::kStopping) return;
  // The members not reaped, and whatever else of the job is left: the current leaf's
  // processes, or the children (orphans adopted by the subreaper) but the watchdog.
  std::vector<pid_t> abandoned;
  for (const Member& m : live_) abandoned.push_back(m.pid);
  for (pid_t pid : cgroup_ != nullptr ? cgroup_->Procs() : ListChildren()) {
    if (pid != watchdog_->pid() && !IsLive(pid)) abandoned.push_back(pid);
  }
  std::vector<std::string> lines;
  for (pid_t pid : abandoned) lines.push_back(StuckProcessLine(DescribeStuckProcess(pid)));
  spdlog::error("processes of the job survived SIGKILL for {}; giving up on them: {}",
                HumanDuration(kKillGrace), absl::StrJoin(lines, "; "));
  live_.clear();
  state_ = State::kIdle;
  loop_->Post([cb = on_stopped_, abandoned = std::move(abandoned)] { cb(abandoned); });
}

void ProcessGroup::SignalLeftovers(int sig) {
  if (cgroup_ != nullptr) {
    // Everything the attempt started is in the leaf, whatever its session or parent.
    if (sig == SIGKILL) {
      cgroup_->Kill();
    } else {
      cgroup_->Signal(sig);
    }
    return;
  }
  SignalSessionLeftovers(sig);
}

void ProcessGroup::SignalSessionLeftovers(int sig) {
  // Groups and sessions whose number an unreaped child of ours holds: members not reaped
  // yet, and orphans the subreaper adopted (daemons a worker double-forked, children of
  // dead workers). Never the agent's own.
  std::set<pid_t> groups, sessions;
  for (const Member& m : live_) groups.insert(m.pid), sessions.insert(m.pid);
  std::vector<pid_t> orphans;
  for (pid_t child : ListChildren()) {
    if (IsOwnHelper(child) || IsLive(child)) continue;
    orphans.push_back(child);
    groups.insert(getpgid(child));
    sessions.insert(getsid(child));
  }
  for (pid_t own : {getpgrp(), getsid(0), -1}) groups.erase(own), sessions.erase(own);
  for (pid_t g : groups) kill(-g, sig);  // ESRCH: the whole group is gone already
  if (sig == SIGKILL) {
    for (pid_t p : FindSessionMembers(sessions)) {
      UniqueFd fd(PidfdOpen(p));
      // Read again through the same number once the pidfd holds it: still in one of those
      // sessions (reserved by our unreaped child), it is the job's.
      if (fd.valid() && sessions.count(getsid(p))) PidfdSignal(fd.get(), SIGKILL);
    }
  }
  for (pid_t child : orphans) {
    UniqueFd fd(PidfdOpen(child));
    if (fd.valid()) PidfdSignal(fd.get(), sig);
  }
}

bool ProcessGroup::IsOwnHelper(pid_t child) const {
  return child == watchdog_->pid() || (is_own_helper_ && is_own_helper_(child));
}

bool ProcessGroup::Leftovers() const {
  if (cgroup_ != nullptr) return cgroup_->Populated();
  // Every member is reaped: whatever of the job is left descends from this process (a
  // subreaper), so it shows as a child.
  for (pid_t child : ListChildren()) {
    if (!IsOwnHelper(child)) return true;
  }
  return false;
}

void ProcessGroup::MaybeFinishStop() {
  if (state_ != State::kStopping || !live_.empty()) return;
  if (Leftovers()) {
    // New orphans may have been adopted since the last round of signals; they get the
    // current one too. Their exits arrive as SIGCHLD (or an inotify event on the cgroup)
    // and bring us back here.
    SignalLeftovers(stop_signal_);
    return;
  }
  if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  if (kill_timer_ != 0) loop_->CancelTimer(kill_timer_);
  stop_timer_ = kill_timer_ = 0;
  if (cgroup_ != nullptr) cgroup_->RemoveLeaf();
  spdlog::debug("{} process group{} stopped in {}", members_.size(),
                members_.size() == 1 ? "" : "s", HumanDuration(EventLoop::Now() - stop_started_));
  state_ = State::kIdle;
  loop_->Post([cb = on_stopped_] { cb({}); });
}

}  // namespace muster
