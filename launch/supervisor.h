// Supervisor: the process above the agent in containment mode "session" when the agent is
// not PID 1 (launch/containment.h, docs/design.md §4.5; issue 18 finding 1).
//
// Without a cgroup, a process that left its worker's session and cleared its environment
// (`env -i setsid`, a double fork) can be found only because the kernel gave it, as an
// orphan, to the nearest child subreaper above it: the agent. Were the agent SIGKILLed,
// such orphans would move on to init and escape the watchdog. So the process the user
// started (the pid a shell, a test or the kubelet knows) stays as a small supervisor, itself
// a child subreaper, and the agent runs as its only child:
//
// - when the agent dies, for any reason, everything below it comes to the supervisor, which
//   kills and reaps all of it (KillAndReapChildren) and then exits as the agent did: with
//   its exit code, or of its signal (re-raised, core dumps off), so that the caller sees
//   what it saw before there was a supervisor;
// - the signals the agent handles (--signals-to-handle) are forwarded to it, through a
//   pidfd. The agent leads a process group of its own, so a signal to the supervisor's
//   group (a terminal's ^C) reaches the agent once, forwarded, never twice;
// - when the supervisor dies (SIGKILL), the agent sees the supervisor's pidfd become
//   readable in its event loop, kills and reaps everything below itself (it is a child
//   subreaper too, so every orphan of the job is below it) and exits.
//
// As PID 1 none is needed: orphans come to it anyway and its death ends the PID namespace.
// In mode "cgroup" none is needed: cgroup.kill reaches every process of the job.
#ifndef MUSTER_LAUNCH_SUPERVISOR_H_
#define MUSTER_LAUNCH_SUPERVISOR_H_

#include <sys/types.h>

#include <vector>

#include "absl/status/statusor.h"
#include "base/unique_fd.h"

namespace muster {

// In the agent: its supervisor.
struct Supervisor {
  pid_t pid = 0;
  UniqueFd pidfd;  // readable (EPOLLIN) once the supervisor has exited
};

// Forks the agent off the calling process, which must not have started any thread.
// The calling process becomes the supervisor and never returns from here (it exits as the
// agent did). In the agent (the child) returns its supervisor; `forwarded` (the signals
// the agent handles) and SIGCHLD are blocked there, as BlockAndOpenSignalFd would. An
// error (fork failed: Unavailable) is returned in the calling process, which is then still
// the only one.
absl::StatusOr<Supervisor> SplitOffAgent(const std::vector<int>& forwarded);

// The pid the user knows (--save-pid): the supervisor's after SplitOffAgent(), else the
// calling process's.
pid_t KnownPid();

}  // namespace muster

#endif  // MUSTER_LAUNCH_SUPERVISOR_H_
