#include "agent/lifecycle/remove_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace muster {
namespace {

// Deeper than any tree the agent makes (run/attempt_N/rank/...): a bound on the recursion.
constexpr int kMaxDepth = 32;

bool Gone(int rc) { return rc == 0 || errno == ENOENT; }

// Removes `name` in `dir_fd` whatever it is.
bool RemoveAt(int dir_fd, const char* name, int depth) {
  // Most directories of a run are empty (only ranks with redirected output hold files).
  if (Gone(unlinkat(dir_fd, name, AT_REMOVEDIR))) return true;
  // ENOTDIR: a file or a symbolic link, removed itself (a link is never followed).
  if (errno == ENOTDIR) return Gone(unlinkat(dir_fd, name, 0));
  if ((errno != ENOTEMPTY && errno != EEXIST) || depth >= kMaxDepth) return false;
  int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    close(fd);
    return false;
  }
  bool ok = true;
  while (dirent* e = readdir(dir)) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN) {
      ok = RemoveAt(fd, e->d_name, depth + 1) && ok;
    } else {
      ok = Gone(unlinkat(fd, e->d_name, 0)) && ok;
    }
  }
  closedir(dir);
  return ok && Gone(unlinkat(dir_fd, name, AT_REMOVEDIR));
}

}  // namespace

bool RemoveTree(const std::string& path) { return RemoveAt(AT_FDCWD, path.c_str(), 0); }

}  // namespace muster
