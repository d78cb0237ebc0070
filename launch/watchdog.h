// Watchdog: a small forked helper that cleans up after an agent that was SIGKILLed.
//
// Workers die with the agent through PDEATHSIG, but their own children do not. The
// watchdog holds one end of a SOCK_SEQPACKET socket pair whose other end only the agent
// (and, until execve, a spawn child) holds; when that reaches EOF without a prior
// Disarm(), the agent is gone and the watchdog kills what is left of the job, then exits:
//
// - mode "cgroup" (launch/cgroup.h): cgroup.kill of the job cgroup, then removes it once
//   "populated 0". Nothing a worker started can be outside it.
// - mode "session": every tracked worker and every process of its session, each through a
//   pidfd. A worker reports itself from the spawn child, before execve (its pid and a pidfd
//   of itself, SpawnSpec::report_fd), so no worker can fork before the watchdog knows it
//   (issue 18 finding 2). The agent untracks a worker as soon as it reaps it, and a session
//   counts as the job's only while its leader is not reaped or its number is not in use by
//   another process, so a recycled pid is never hit (finding 5). A process that left its
//   worker's session (setsid, a daemon's double fork) is found by the mark every worker
//   gets in its environment (mark(): MUSTER_AGENT_MARK=<agent pid>.<random>), which its
//   descendants inherit: the watchdog kills every process whose /proc/PID/environ holds it.
//   A process that also clears its environment (env -i) and leaves the session carries no
//   mark; it is found by parentage instead: unless the agent is PID 1, a supervisor (the
//   process the user started, a child subreaper) runs above the agent and kills every
//   process below it once the agent is gone (launch/supervisor.h). Only if the agent and
//   its supervisor are SIGKILLed together does such a process escape; mode "cgroup" has no
//   such gap.
//
// The watchdog lives in its own process group; the agent's blocked signal mask is
// inherited, so the job's signals never reach it. A watchdog that dies anyway (OOM killer,
// a worker's "kill everything") is restarted by the agent as soon as it reaps it (Restart()
// then Track() of every live worker, finding 6). It is forked with _Fork (no atfork
// handlers) and runs only async-signal-safe code on fixed-size tables, so it may be
// started after threads exist.
//
// No write to the watchdog blocks the agent: its end of the socket is non-blocking. A
// watchdog whose socket is full (SIGSTOPped, hung: net.unix.max_dgram_qlen datagrams
// unread) is SIGKILLed and replaced like a dead one, and the new one is told every live
// worker; a disarmed one is just killed (issue 31 item 3). Not thread-safe: used from the
// agent's loop thread.
#ifndef MUSTER_LAUNCH_WATCHDOG_H_
#define MUSTER_LAUNCH_WATCHDOG_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/unique_fd.h"

namespace muster {

class Watchdog {
 public:
  // `cgroup_dir`: the job cgroup to kill (mode "cgroup"), or "" (mode "session").
  static absl::StatusOr<std::unique_ptr<Watchdog>> Start(std::string cgroup_dir = "");

  pid_t pid() const { return pid_; }
  // "MUSTER_AGENT_MARK=<agent pid>.<random>": mode "session" puts it into every worker's
  // environment, so that the watchdog finds their descendants outside their sessions.
  const std::string& mark() const { return mark_; }
  // The agent's end, for SpawnSpec::report_fd (close-on-exec). Changes on Restart().
  int report_fd() const { return socket_.get(); }
  // A worker the watchdog must kill with the agent: its pid and a pidfd of it.
  void Track(pid_t pid, int pidfd);
  // After a spawn child reported itself: a watchdog so far behind that the report may have
  // been dropped (3/4 of its socket's buffer unread) is killed and replaced, like one whose
  // socket is full.
  void CheckBacklog();
  // Reaped workers: forgotten, so their pids are never signalled again.
  void Untrack(absl::Span<const pid_t> pids);
  // The agent is exiting on purpose: the watchdog exits without killing anything. Does
  // not wait for it: the agent goes on with its own teardown meanwhile.
  void Disarm();
  bool disarmed() const { return disarmed_; }
  // After Disarm(): reaps the watchdog if it has exited, without waiting. False while it
  // still runs (it exits on its own; whoever inherits it then reaps it).
  bool ReapIfGone();
  // The watchdog died (the caller reaped it): starts a new one. The caller then Track()s
  // every worker still running.
  absl::Status Restart();

 private:
  explicit Watchdog(std::string cgroup_dir);
  absl::Status Fork();
  void Send(char op, pid_t pid, int pidfd = -1);
  void KillStuck();

  std::string cgroup_dir_;
  std::string mark_;
  pid_t pid_ = 0;
  UniqueFd socket_;
  bool warned_ = false;
  bool disarmed_ = false;
  bool stuck_ = false;  // stopped reading; killed, not yet restarted
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_WATCHDOG_H_
