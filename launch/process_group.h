// ProcessGroup: the processes one attempt started, and how they are stopped so that
// nothing of the job outlives the attempt (docs/design.md §4.5).
//
// Two containment modes (`--containment`, docs/design.md §4.5):
// - cgroup (a JobCgroup is given): each attempt's members start inside a fresh leaf cgroup
//   (entered by the spawn child before execve). Stop(sig) signals every process in it
//   through pidfds; SIGKILL is cgroup.kill. Stopped = every member reaped and the leaf
//   empty ("populated 0", watched through inotify, not polled); the leaf is then removed.
// - session: every member leads its own session and process group and reports itself to
//   the watchdog before execve. Stop(sig) sends `sig` to the process group of every member
//   not reaped yet and of every child the subreaper adopted (daemons a worker
//   double-forked, children of dead workers), and to those children; after the shutdown
//   timeout survivors get SIGKILL, together with every process in one of those sessions.
//   Stopped = every member reaped and no child left but the watchdog.
// Signals never go to a number that may have been recycled: a group or session is
// signalled only while a process that holds its number is an unreaped child of ours
// (reaping is ours, on this thread), single processes only through pidfds. If processes
// survive SIGKILL for kKillGrace (uninterruptible sleep) it gives up on them and says so.
//
// Members come in through Adopt, whatever started them (launch/worker_source.h).
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
#include "base/unique_fd.h"
#include "launch/cgroup.h"
#include "launch/spawner.h"
#include "launch/watchdog.h"
#include "launch/worker_source.h"

namespace muster {

class ProcessGroup {
 public:
  // Extra time after SIGKILL for the kernel to tear processes down (a worker freeing a lot
  // of GPU memory can take seconds). Past it the group gives up waiting and says so.
  static constexpr absl::Duration kKillGrace = absl::Seconds(10);

  // `abandoned`: members never reaped because they survived SIGKILL for kKillGrace, then any
  // other process of the job left then (launch/stuck_process.h names them).
  using StoppedCallback = std::function<void(const std::vector<pid_t>& abandoned)>;

  // `cgroup`: mode cgroup when given (borrowed); the caller watches cgroup->wait_fd() and
  // calls OnReaped() when it fires.
  ProcessGroup(EventLoop* loop, Watchdog* watchdog, absl::Duration shutdown_timeout,
               StoppedCallback on_stopped, JobCgroup* cgroup = nullptr);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Children of the agent that are not the job's (a warm template, launch/warm_source.h):
  // stopping an attempt neither signals nor waits for them. The watchdog always is one.
  void SetOwnHelpers(std::function<bool(pid_t)> is_own_helper) {
    is_own_helper_ = std::move(is_own_helper);
  }
  // Begins a new attempt: forgets the last one's members (all reaped by now); in mode cgroup
  // a fresh leaf.
  absl::Status Begin();
  // Where this attempt's members must be, for the source that starts them
  // (launch/worker_source.h): the current leaf in mode cgroup, the watchdog in mode session.
  WorkerContainment containment() const;
  // Takes a member a source started, contained as containment() said, our unreaped child.
  // `pidfd` may be invalid (a kernel without pidfd_open).
  void Adopt(pid_t pid, UniqueFd pidfd);
  // Starts a member by exec (ExecSource with stdio inherited) and adopts it. On failure
  // nothing was started (Spawn's NotFound / PermissionDenied / FailedPrecondition, or the
  // errno of clone).
  absl::StatusOr<pid_t> Spawn(const SpawnSpec& spec);
  // A reaped child: true when it was a member still running (the caller records how it
  // ended); false for anything else (an orphan, the watchdog, a member reaped already).
  bool OnChildExited(pid_t pid);
  // After a batch of reaps (or a change of the cgroup): while stopping, re-checks what is
  // left.
  void OnReaped();
  // After the watchdog was restarted: tells it every member still running again.
  void TrackAgain();

  // Idempotent: starts stopping with `sig`; while stopping, a different signal is forwarded
  // too (unless SIGKILL was sent already). When idle, on_stopped follows at once.
  void Stop(int sig) { Stop(sig, shutdown_timeout_); }
  // As Stop(sig), SIGKILL `grace` after `sig` (a stop's grace is the first Stop's).
  void Stop(int sig, absl::Duration grace);
  // SIGKILL now, without waiting for the rest of the grace period.
  void Escalate();

  bool running() const { return state_ == State::kRunning; }
  bool stopping() const { return state_ == State::kStopping; }

 private:
  enum class State { kIdle, kRunning, kStopping };

  struct Member {
    pid_t pid;
    UniqueFd pidfd;  // closed once reaped
  };

  bool IsLive(pid_t pid) const;
  void SignalLeftovers(int sig);
  void SignalSessionLeftovers(int sig);
  bool IsOwnHelper(pid_t child) const;  // the watchdog, or is_own_helper_ says so
  bool Leftovers() const;
  void MaybeFinishStop();
  void GiveUp();

  EventLoop* loop_;
  Watchdog* watchdog_;
  std::function<bool(pid_t)> is_own_helper_;
  JobCgroup* cgroup_;
  absl::Duration shutdown_timeout_;
  StoppedCallback on_stopped_;

  State state_ = State::kIdle;
  std::vector<pid_t> members_;  // this attempt's, in spawn order
  std::vector<Member> live_;    // members not reaped yet
  int stop_signal_ = 0;
  absl::Time stop_started_;
  EventLoop::TimerId stop_timer_ = 0, kill_timer_ = 0;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_PROCESS_GROUP_H_
