// The preemption notice as a worker sees it (issue 17 item 4, docs/guides/preemption.md): the
// file named by MUSTER_PREEMPTED in its environment, which the agent writes with the
// reason, then the --preempt-signal (SIGUSR1 by default), sent only to a worker that
// catches it: to any other its default action would kill it before it could checkpoint.
// Plain functions; thread-safe.
#ifndef MUSTER_AGENT_PREEMPT_NOTICE_H_
#define MUSTER_AGENT_PREEMPT_NOTICE_H_

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "launch/worker_launcher.h"

namespace muster {

// Where the worker whose directory is `worker_dir` finds the notice.
std::string PreemptedFile(const std::string& worker_dir);

// Sets MUSTER_PREEMPTED in `env` ("NAME=value", sorted by name).
void AddPreemptEnv(const std::string& worker_dir, std::vector<std::string>* env);

// Whether process `pid` has a handler installed for `sig` (SigCgt of /proc/PID/status);
// false when it cannot be read (it ended).
bool CatchesSignal(pid_t pid, int sig);

// What the notice reached on this node.
struct NoticeDelivery {
  int running = 0;    // workers still running
  int signalled = 0;  // ... that catch `sig` and were sent it
  // Workers the agent waits for: those signalled, or, with `sig` 0 (none), every running
  // one (they read the file).
  int listening = 0;
};

// Writes `reason` into every running worker's MUSTER_PREEMPTED file, then sends `sig` (0:
// none) to those that catch it, through a pidfd. Loop thread: no worker is reaped while
// this runs. Failures are logged and counted out, never fatal.
NoticeDelivery DeliverPreemptNotice(const std::vector<WorkerView>& workers, int sig,
                                    const std::string& reason);

// Every worker of the attempt has ended (or never started).
bool AllWorkersEnded(const std::vector<WorkerView>& workers);

}  // namespace muster

#endif  // MUSTER_AGENT_PREEMPT_NOTICE_H_
