// Runs the probe in a forked child so that a driver that hangs or crashes
// (SIGSEGV inside libcuda) can neither hang nor crash the caller. The child
// streams progress lines ("S cuInit") and finally its report ("R <json>")
// through a pipe; the parent waits with a deadline and SIGKILLs the child when
// it passes, naming the stage it was stuck in. The fork, the wait and the reap are
// launch/'s, as for every child of muster (launch/captured_run.h: ForkHelper, AwaitHelpers).
//
// Call from a single-threaded process before any driver library is loaded
// (muster-probe's main does): only the child ever dlopens a driver.
#ifndef MUSTER_NCCL_PROBE_PROBE_CHILD_H_
#define MUSTER_NCCL_PROBE_PROBE_CHILD_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nccl_probe/allreduce_bench.h"

namespace muster::probe {

// Work done in the child: returns the payload (one line, no '\n').
using ChildWork = std::function<std::string(const StageFn& stage)>;

// The payload, or DeadlineExceeded("... timed out after 30s during cuInit"),
// or Internal("... killed by SIGSEGV during cuInit") / Internal("... exited 1
// without a report").
absl::StatusOr<std::string> RunInChild(const ChildWork& work, absl::Duration timeout);

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_PROBE_CHILD_H_
