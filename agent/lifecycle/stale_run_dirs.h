// Stale run directories: what an agent killed before it could clean up (SIGKILL, the OOM
// killer) leaves in a temporary root (TMPDIR, /dev/shm, /tmp): a muster_XXXXXX directory
// per agent, which piled up by the dozen on machines that run many jobs. An agent locks
// its root (flock on <root>/.muster-lock) for as long as it lives, and the kernel drops the
// lock when the agent dies, however it dies; the next agent to start removes every root
// whose lock nobody holds. A root without a lock file (a failed job's kept logs: the agent
// deletes the file when it keeps them; a root of an older muster) is never touched.
// Thread-compatible (no state).
#ifndef MUSTER_AGENT_STALE_RUN_DIRS_H_
#define MUSTER_AGENT_STALE_RUN_DIRS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/unique_fd.h"

namespace muster {

inline constexpr char kRunDirLockName[] = ".muster-lock";

// Creates and locks <root>/.muster-lock; the lock is held until the returned descriptor is
// closed (close-on-exec: no worker holds it). The file appears already locked (made under
// another name, then renamed), so that another agent's scan never takes a live lock.
absl::StatusOr<UniqueFd> LockRunRoot(const std::string& root);

// Where temporary roots are made: TMPDIR when set, else /dev/shm and /tmp.
std::vector<std::string> TemporaryParents();

// Removes each <parent>/muster_* directory of this user whose lock file nobody holds.
// Returns the directories removed.
std::vector<std::string> RemoveStaleRunDirs(const std::vector<std::string>& parents);

}  // namespace muster

#endif  // MUSTER_AGENT_STALE_RUN_DIRS_H_
