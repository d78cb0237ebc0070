// RemoveTree: deletes the agent's temporary run directory at exit. Part of the agent's
// shutdown path (B8), so it costs one rmdir per empty directory: each directory is removed
// first and read only when that fails because it is not empty, never stat'ed, and never
// followed through a symbolic link. Thread-compatible (no state).
#ifndef MUSTER_AGENT_REMOVE_TREE_H_
#define MUSTER_AGENT_REMOVE_TREE_H_

#include <string>

namespace muster {

// Removes `path` and everything below it. Best effort: returns false when something could
// not be removed (it stays; nothing depends on it). A path that does not exist is removed.
bool RemoveTree(const std::string& path);

}  // namespace muster

#endif  // MUSTER_AGENT_REMOVE_TREE_H_
