// Read-only views of the process tree from /proc, for cleanup: the agent is a
// child subreaper, so every orphan of the job becomes its child and can be
// found here.
#ifndef MUSTER_LAUNCH_PROCESS_TREE_H_
#define MUSTER_LAUNCH_PROCESS_TREE_H_

#include <sys/types.h>

#include <set>
#include <vector>

#include "absl/status/status.h"

namespace muster {

// Makes the calling process a child subreaper (PR_SET_CHILD_SUBREAPER).
absl::Status BecomeSubreaper();

// Direct children of the calling process (all its threads), from
// /proc/self/task/*/children. Empty when /proc is not mounted. In TSan builds, not the
// sanitizer's own llvm-symbolizer.
std::vector<pid_t> ListChildren();

// True while any process is left in process group `pgid` (zombies included).
bool ProcessGroupExists(pid_t pgid);

// Processes (zombies included) whose session id is in `sessions`: getsid() of every pid in
// /proc.
std::vector<pid_t> FindSessionMembers(const std::set<pid_t>& sessions);

}  // namespace muster

#endif  // MUSTER_LAUNCH_PROCESS_TREE_H_
