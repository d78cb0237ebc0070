#include "launch/process_group.h"

#include <signal.h>

#include <algorithm>
#include <set>

#include "base/duration.h"
#include "base/log_format.h"
#include "launch/process_tree.h"
#include "spdlog/spdlog.h"

namespace muster {

ProcessGroup::ProcessGroup(EventLoop* loop, Watchdog* watchdog, absl::Duration shutdown_timeout,
                           StoppedCallback on_stopped)
    : loop_(loop),
      watchdog_(watchdog),
      shutdown_timeout_(shutdown_timeout),
      on_stopped_(std::move(on_stopped)) {}

ProcessGroup::~ProcessGroup() {
  if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  if (kill_timer_ != 0) loop_->CancelTimer(kill_timer_);
}

void ProcessGroup::Begin() {
  state_ = State::kRunning;
  members_.clear();
  live_.clear();
}

absl::StatusOr<pid_t> ProcessGroup::Spawn(const SpawnSpec& spec) {
  absl::StatusOr<pid_t> pid = muster::Spawn(spec);
  if (!pid.ok()) return pid;
  members_.push_back(*pid);
  live_.push_back(*pid);
  watchdog_->Track(*pid);
  return pid;
}

bool ProcessGroup::IsMember(pid_t pid) const {
  return std::find(members_.begin(), members_.end(), pid) != members_.end();
}

bool ProcessGroup::OnChildExited(pid_t pid) {
  auto it = std::find(live_.begin(), live_.end(), pid);
  if (it == live_.end()) return false;
  live_.erase(it);
  return true;
}

void ProcessGroup::OnReaped() {
  if (state_ == State::kStopping) MaybeFinishStop();
}

void ProcessGroup::Stop(int sig) {
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
  stop_timer_ = loop_->AddTimer(stop_started_ + shutdown_timeout_, [this] {
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
  spdlog::error(
      "processes of the job survived SIGKILL for {} (uninterruptible sleep?); giving up on them",
      HumanDuration(kKillGrace));
  std::vector<pid_t> abandoned = std::move(live_);
  live_.clear();
  state_ = State::kIdle;
  loop_->Post([cb = on_stopped_, abandoned = std::move(abandoned)] { cb(abandoned); });
}

void ProcessGroup::SignalLeftovers(int sig) {
  std::set<pid_t> sessions(members_.begin(), members_.end());
  for (pid_t pid : members_) {
    kill(-pid, sig);  // ESRCH: the whole group is gone already, which is what we want
  }
  if (sig == SIGKILL) {
    for (pid_t p : FindSessionMembers(sessions)) kill(p, SIGKILL);
  }
  // Orphans adopted by the agent (daemons a worker double-forked, children of dead
  // workers): they belong to the job too.
  for (pid_t child : ListChildren()) {
    if (child == watchdog_->pid() || IsMember(child)) continue;  // members: through the group
    kill(child, sig);
  }
}

void ProcessGroup::MaybeFinishStop() {
  if (state_ != State::kStopping || !live_.empty()) return;
  bool leftovers = std::any_of(members_.begin(), members_.end(),
                               [](pid_t pid) { return ProcessGroupExists(pid); });
  for (pid_t child : ListChildren()) {
    if (child != watchdog_->pid()) leftovers = true;
  }
  if (leftovers) {
    // New orphans may have been adopted since the last round of signals; they get the
    // current one too. Their exits arrive as SIGCHLD and bring us back here.
    SignalLeftovers(stop_signal_);
    return;
  }
  if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  if (kill_timer_ != 0) loop_->CancelTimer(kill_timer_);
  stop_timer_ = kill_timer_ = 0;
  watchdog_->Untrack(members_);
  spdlog::debug("{} process group{} stopped in {}", members_.size(),
                members_.size() == 1 ? "" : "s", HumanDuration(EventLoop::Now() - stop_started_));
  state_ = State::kIdle;
  loop_->Post([cb = on_stopped_] { cb({}); });
}

}  // namespace muster
