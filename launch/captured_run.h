// RunCaptured: runs a short helper program (the agent's look at the workers' Python,
// agent/workers/worker_torch.h) to its end and returns what it printed on stdout, within a
// deadline. The child is spawned as a worker is (launch/spawner.h: its own session, PDEATHSIG, only
// fds 0-2) with stdout on a pipe; past the deadline it is SIGKILLed and reaped.
// Call from the main thread before the agent's event loop reaps children (it waits for its
// own child by pid). Thread-compatible.
#ifndef MUSTER_LAUNCH_CAPTURED_RUN_H_
#define MUSTER_LAUNCH_CAPTURED_RUN_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "launch/spawner.h"

namespace muster {

struct CapturedRun {
  int exit_code = 0;  // the exit code, or 128+N when signal N killed it
  std::string out;    // everything written to stdout
};

// `spec.fds` gets stdout's pipe added. Errors: Spawn's (NotFound, PermissionDenied, ...),
// DeadlineExceeded after `timeout`, or the errno of pipe2/read.
absl::StatusOr<CapturedRun> RunCaptured(SpawnSpec spec, absl::Duration timeout);

}  // namespace muster

#endif  // MUSTER_LAUNCH_CAPTURED_RUN_H_
