// StackCollector: this node's part of `muster stacks` (issue 17 item 1, README "Stacks").
// On a request it signals every running worker whose stack hook (agent/stack_hook.h) is in
// place, through a pidfd, and gathers what faulthandler writes to the worker's stack file:
// a dump is complete once its file has grown and then stayed still for a moment. Workers
// without the hook, ended ones and those that wrote nothing by the deadline are reported
// with the reason instead of a stack.
//
// Ownership: borrows the launcher, which must outlive it; the destructor joins the
// collections in flight (each ends by its deadline). Collect() runs on the agent's loop
// thread (the launcher's workers are read there, and a worker cannot be reaped while it
// signals it); the waiting happens on a thread of the collector's own.
#ifndef MUSTER_AGENT_STACK_COLLECTOR_H_
#define MUSTER_AGENT_STACK_COLLECTOR_H_

#include <functional>
#include <vector>

#include "absl/time/time.h"
#include "base/thread_set.h"
#include "launch/worker_launcher.h"
#include "rendezvous/core/stacks.h"

namespace muster {

class StackCollector {
 public:
  using Done = std::function<void(std::vector<rdzv::RankStack> ranks)>;

  explicit StackCollector(const WorkerLauncher* launcher) : launcher_(launcher) {}

  // Signals the workers now; `done` gets every worker of the current attempt, by rank,
  // within `timeout` (from the collector's thread).
  void Collect(absl::Duration timeout, Done done);

 private:
  const WorkerLauncher* const launcher_;
  ThreadSet waiters_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_STACK_COLLECTOR_H_
