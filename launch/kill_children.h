// Ending everything below a child subreaper: the supervisor when the agent has died, the
// agent when its supervisor has (launch/supervisor.h).
#ifndef MUSTER_LAUNCH_KILL_CHILDREN_H_
#define MUSTER_LAUNCH_KILL_CHILDREN_H_

#include "absl/time/time.h"

namespace muster {

// SIGKILL, through a pidfd, to every child of the calling process (ListChildren()), then
// reaps each; again for what was re-parented to it meanwhile (the caller must be a child
// subreaper, so that every orphan below it comes to it), until it has no child left. True
// then; false when `timeout` passed first (a process stuck in the kernel) or /proc is not
// mounted. Blocks the calling thread.
bool KillAndReapChildren(absl::Duration timeout);

}  // namespace muster

#endif  // MUSTER_LAUNCH_KILL_CHILDREN_H_
