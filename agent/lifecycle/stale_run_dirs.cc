#include "agent/lifecycle/stale_run_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "agent/lifecycle/remove_tree.h"
#include "base/errno_status.h"

namespace muster {
namespace {

// Whether `dir` is an agent's temporary root that nobody holds: a directory of this user
// with a lock file that can be locked now. The lock is taken and dropped again.
bool IsStale(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return false;
  }
  std::string lock = absl::StrCat(dir, "/", kRunDirLockName);
  UniqueFd fd(open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return false;  // no lock file: kept logs, or not ours to judge
  return flock(fd.get(), LOCK_EX | LOCK_NB) == 0;
}

}  // namespace

absl::StatusOr<UniqueFd> LockRunRoot(const std::string& root) {
  std::string fresh = absl::StrCat(root, "/", kRunDirLockName, ".new");
  UniqueFd fd(open(fresh.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("open " + fresh, errno);
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return ErrnoStatus("flock " + fresh, errno);
  std::string lock = absl::StrCat(root, "/", kRunDirLockName);
  if (rename(fresh.c_str(), lock.c_str()) != 0) return ErrnoStatus("rename to " + lock, errno);
  return fd;
}

std::vector<std::string> TemporaryParents() {
  const char* tmp = getenv("TMPDIR");
  if (tmp != nullptr && *tmp != '\0') return {tmp};
  return {"/dev/shm", "/tmp"};
}

std::vector<std::string> RemoveStaleRunDirs(const std::vector<std::string>& parents) {
  std::vector<std::string> removed;
  for (const std::string& parent : parents) {
    std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(parent.c_str()), closedir);
    if (d == nullptr) continue;  // a parent that is not there holds nothing stale
    while (dirent* e = readdir(d.get())) {
      std::string name = e->d_name;
      if (name.rfind("muster_", 0) != 0) continue;
      std::string dir = absl::StrCat(parent, "/", name);
      if (IsStale(dir) && RemoveTree(dir)) removed.push_back(dir);
    }
  }
  return removed;
}

}  // namespace muster
