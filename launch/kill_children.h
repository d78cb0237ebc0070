// Ending everything below a child subreaper: the supervisor when the agent has died, the
// agent when its supervisor has (launch/supervisor.h).
#ifndef MUSTER_LAUNCH_KILL_CHILDREN_H_
#define MUSTER_LAUNCH_KILL_CHILDREN_H_

#include <sys/types.h>

#include <vector>

#include "absl/time/time.h"

namespace muster {

// SIGKILL, through a pidfd, to every child of the calling process (ListChildren()), then
// reaps each; again for what was re-parented to it meanwhile (the caller must be a child
// subreaper, so that every orphan below it comes to it), until it has no child left. True
// then; false when `timeout` passed first (a process stuck in the kernel, a dead child whose
// zombie a ptrace tracer holds) or /proc is not mounted; `stuck`, when given, then lists
// the children not reaped. Every wait has `timeout` as its deadline. Blocks the calling
// thread; SIGCHLD is blocked in it meanwhile.
bool KillAndReapChildren(absl::Duration timeout, std::vector<pid_t>* stuck = nullptr);

// Waits for child `pid` (`pidfd`: a pidfd of it, or -1) to exit and reaps it, storing its
// wait status in `wstatus`; gives up after `timeout` (a zombie a ptrace tracer holds is not
// reapable until the tracer lets go). True once reaped (or when it is no child of ours: ECHILD,
// `wstatus` untouched).
bool ReapChild(pid_t pid, int pidfd, absl::Duration timeout, int* wstatus);

}  // namespace muster

#endif  // MUSTER_LAUNCH_KILL_CHILDREN_H_
