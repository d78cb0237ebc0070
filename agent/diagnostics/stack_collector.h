// StackCollector: this node's part of `muster stacks` (issue 17 item 1,
// docs/guides/hangs-and-stacks.md "Stacks"). On a request it signals every running worker whose
// stack hook (agent/diagnostics/stack_hook.h) is in place, through a pidfd, and gathers what
// faulthandler writes to the worker's stack file: a dump is complete once its file has grown and
// then stayed still for a moment. Workers without the hook and those that wrote nothing in time are
// read by py-spy where it is on the agent's PATH (agent/diagnostics/py_spy.h), in the second half
// of the time; the others, and ended workers, are reported with the reason instead of a stack.
//
// Ownership: borrows the launcher, which must outlive it; the destructor joins the
// collections in flight (each ends by its deadline). Collect() runs on the agent's loop
// thread (the launcher's workers are read there, and a worker cannot be reaped while it
// signals it); the waiting happens on a thread of the collector's own.
#ifndef MUSTER_AGENT_STACK_COLLECTOR_H_
#define MUSTER_AGENT_STACK_COLLECTOR_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "base/thread_set.h"
#include "launch/worker_launcher.h"
#include "rendezvous/core/stacks.h"

namespace muster {

class StackCollector {
 public:
  using Done = std::function<void(std::vector<rdzv::RankStack> ranks)>;

  struct Options {
    bool hook = true;    // false with --no-stack-hook: no worker has the hook
    std::string py_spy;  // py-spy for ranks the hook does not answer for; empty: none
  };

  StackCollector(const WorkerLauncher* launcher, Options options)
      : launcher_(launcher), options_(std::move(options)) {}

  // Signals the workers now; `done` gets every worker of the current attempt, by rank,
  // within `timeout` (from the collector's thread).
  void Collect(absl::Duration timeout, Done done);

 private:
  const WorkerLauncher* const launcher_;
  const Options options_;
  ThreadSet waiters_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_STACK_COLLECTOR_H_
