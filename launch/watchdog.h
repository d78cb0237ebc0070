// Watchdog: a small forked helper that cleans up after an agent that was
// SIGKILLed.
//
// Workers die with the agent through PDEATHSIG, but their own children do not.
// The watchdog holds the read end of a pipe whose only write end is the
// agent's; when that reaches EOF without a prior Disarm(), the agent is gone,
// and the watchdog SIGKILLs every tracked worker session (process groups first,
// then a /proc scan for session members) and exits. It lives in its own process
// group and ignores the job's signals, so a Ctrl-C to the agent's group does
// not take it down first.
//
// Start() must run before the agent starts any thread (it forks). Not
// thread-safe; used from the agent's loop thread.
#ifndef MUSTER_LAUNCH_WATCHDOG_H_
#define MUSTER_LAUNCH_WATCHDOG_H_

#include <sys/types.h>

#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/unique_fd.h"

namespace muster {

class Watchdog {
 public:
  static absl::StatusOr<std::unique_ptr<Watchdog>> Start();

  pid_t pid() const { return pid_; }
  // `session` is a worker's pid (each worker leads its own session).
  void Track(pid_t session);
  // All of `sessions` in one write: one wake-up of the watchdog, not one per worker.
  void Untrack(absl::Span<const pid_t> sessions);
  // The agent is exiting on purpose: the watchdog exits without killing
  // anything. Does not wait for it: the agent goes on with its own teardown meanwhile.
  void Disarm();
  // After Disarm(): reaps the watchdog if it has exited, without waiting. False while it
  // still runs (it exits on its own; whoever inherits it then reaps it).
  bool ReapIfGone();

 private:
  Watchdog(pid_t pid, UniqueFd pipe) : pid_(pid), pipe_(std::move(pipe)) {}
  void Send(char op, pid_t session);
  void Write(const void* data, size_t size);

  pid_t pid_;
  UniqueFd pipe_;
  bool warned_ = false;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_WATCHDOG_H_
