// Who owns a --debug-dir: the agent whose rank-N.env files are there. Debug mode's files are
// only true while their agent lives (they name its store's MASTER_PORT); an agent killed
// before it could clean up used to leave them, and `muster exec` started a rank that hung
// on a dead port. Now the agent locks <dir>/.muster-lock (flock, dropped by the kernel
// however the agent dies) and writes its pid to <dir>/agent.pid while it lives, removes its
// files when it exits, and `muster exec` refuses files whose writer is gone, naming its pid.
// A second agent given the same directory is refused at start, before it overwrites a live
// agent's files. Thread-compatible (no state).
#ifndef MUSTER_AGENT_DEBUG_DIR_OWNER_H_
#define MUSTER_AGENT_DEBUG_DIR_OWNER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/unique_fd.h"

namespace muster {

// Makes `dir` this agent's: creates it if missing, refuses it (FailedPrecondition naming
// the other agent's pid) while another agent holds it, removes a dead agent's files, takes
// the lock and writes agent.pid. The lock is held until the returned descriptor is closed.
absl::StatusOr<UniqueFd> ClaimDebugDir(const std::string& dir);

// The agent is exiting: removes its rank files, hostfile, agent.pid and lock file. Best
// effort (a file another user removed is not an error); call before closing the lock.
void ReleaseDebugDir(const std::string& dir);

// For `muster exec`: OK when the files' agent still runs, or when nothing says who wrote
// them (an older muster); FailedPrecondition naming the pid when their agent is gone.
absl::Status CheckDebugDirOwner(const std::string& dir);

}  // namespace muster

#endif  // MUSTER_AGENT_DEBUG_DIR_OWNER_H_
