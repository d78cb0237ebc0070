// The reap loop of a child subreaper (tini's contract): after a SIGCHLD, every exited
// child is collected, workers and adopted orphans alike, so none stays a zombie.
// Thread-safe (no state); call from the thread that handles SIGCHLD.
#ifndef MUSTER_LAUNCH_REAPER_H_
#define MUSTER_LAUNCH_REAPER_H_

#include <sys/types.h>

#include <functional>

namespace muster {

// Reaps every child that has exited, without blocking, and calls `on_exit(pid, wstatus)`
// for each in the order waitpid returns them. One SIGCHLD may stand for many exits (the
// kernel coalesces pending signals), so the loop runs until none is left. Returns how
// many were reaped.
int ReapExitedChildren(const std::function<void(pid_t pid, int wstatus)>& on_exit);

}  // namespace muster

#endif  // MUSTER_LAUNCH_REAPER_H_
