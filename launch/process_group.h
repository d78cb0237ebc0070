// ProcessGroup: the processes one attempt started, and how they are stopped so that
// nothing of the job outlives the attempt (DESIGN §4.5).
//
// Every member leads its own session and process group (SpawnSpec::new_session) and is
// tracked by the watchdog from the moment it exists. Stop(sig) sends `sig` to every
// member's process group and to every orphan the subreaper adopted (daemons a worker
// double-forked, children of dead workers); after the shutdown timeout survivors get
// SIGKILL, together with any process still in a member's session. The group counts as
// stopped when every member is reaped and no process group of a member nor any adopted
// child is left; if processes survive SIGKILL for kKillGrace (uninterruptible sleep) it
// gives up on them and says so.
//
// The caller reaps (it owns SIGCHLD) and hands every reaped pid to OnChildExited, then
// calls OnReaped once per batch. on_stopped runs posted on the loop, never from inside a
// method. Owned by the worker group; borrows the loop and the watchdog. Not thread-safe:
// the loop thread only.
#ifndef MUSTER_LAUNCH_PROCESS_GROUP_H_
#define MUSTER_LAUNCH_PROCESS_GROUP_H_

#include <sys/types.h>

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/event_loop.h"
#include "launch/spawner.h"
#include "launch/watchdog.h"

namespace muster {

class ProcessGroup {
 public:
  // Extra time after SIGKILL for the kernel to tear processes down (a worker freeing a lot
  // of GPU memory can take seconds). Past it the group gives up waiting and says so.
  static constexpr absl::Duration kKillGrace = absl::Seconds(10);

  // `abandoned`: members never reaped because they survived SIGKILL for kKillGrace.
  using StoppedCallback = std::function<void(const std::vector<pid_t>& abandoned)>;

  ProcessGroup(EventLoop* loop, Watchdog* watchdog, absl::Duration shutdown_timeout,
               StoppedCallback on_stopped);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Begins a new attempt: forgets the last one's members (all reaped by now).
  void Begin();
  // Starts a member. On failure nothing was started (Spawn's NotFound / PermissionDenied /
  // FailedPrecondition, or the errno of clone).
  absl::StatusOr<pid_t> Spawn(const SpawnSpec& spec);
  // A reaped child: true when it was a member still running (the caller records how it
  // ended); false for anything else (an orphan, the watchdog, a member reaped already).
  bool OnChildExited(pid_t pid);
  // After a batch of reaps: while stopping, re-checks what is left.
  void OnReaped();

  // Idempotent: starts stopping with `sig`; while stopping, a different signal is forwarded
  // too (unless SIGKILL was sent already). When idle, on_stopped follows at once.
  void Stop(int sig);
  // SIGKILL now, without waiting for the rest of the grace period.
  void Escalate();

  bool running() const { return state_ == State::kRunning; }
  bool stopping() const { return state_ == State::kStopping; }

 private:
  enum class State { kIdle, kRunning, kStopping };

  bool IsMember(pid_t pid) const;
  void SignalLeftovers(int sig);
  void MaybeFinishStop();
  void GiveUp();

  EventLoop* loop_;
  Watchdog* watchdog_;
  absl::Duration shutdown_timeout_;
  StoppedCallback on_stopped_;

  State state_ = State::kIdle;
  std::vector<pid_t> members_;  // this attempt's, in spawn order
  std::vector<pid_t> live_;     // members not reaped yet
  int stop_signal_ = 0;
  absl::Time stop_started_;
  EventLoop::TimerId stop_timer_ = 0, kill_timer_ = 0;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_PROCESS_GROUP_H_
