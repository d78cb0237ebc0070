// The reap loop of a child subreaper (tini's contract): after a SIGCHLD, every exited
// child is collected, workers and adopted orphans alike, so none stays a zombie.
// Thread-safe (no state); call from the thread that handles SIGCHLD.
#ifndef MUSTER_LAUNCH_REAPER_H_
#define MUSTER_LAUNCH_REAPER_H_

#include <sys/types.h>

#include <functional>

#include "absl/time/time.h"

namespace muster {

// Reaps every child that has exited, without blocking, and calls `on_exit(pid, wstatus)`
// for each in the order waitpid returns them. One SIGCHLD may stand for many exits (the
// kernel coalesces pending signals), so the loop runs until none is left. Returns how
// many were reaped.
int ReapExitedChildren(const std::function<void(pid_t pid, int wstatus)>& on_exit);

// Waits up to `timeout` for child `pid` (unreaped) to exit, through a pidfd, then reaps it
// without blocking, storing its wait status in `wstatus` when given. False when it has not
// exited by then, or cannot be reaped yet (a ptrace tracer holds its zombie): whoever
// handles SIGCHLD reaps it later. True also when it is no child of ours any more (ECHILD:
// reaped elsewhere; `wstatus` untouched). Consumes no SIGCHLD, so it may run beside an event
// loop that reaps on SIGCHLD.
bool ReapChildWithin(pid_t pid, absl::Duration timeout, int* wstatus = nullptr);

}  // namespace muster

#endif  // MUSTER_LAUNCH_REAPER_H_
