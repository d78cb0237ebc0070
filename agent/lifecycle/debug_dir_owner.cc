#include "agent/lifecycle/debug_dir_owner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/lifecycle/status_file.h"
#include "base/errno_status.h"
#include "base/status_macros.h"

namespace muster {
namespace {

constexpr char kLockName[] = ".muster-lock";
constexpr char kPidName[] = "agent.pid";

std::string LockPath(const std::string& dir) { return absl::StrCat(dir, "/", kLockName); }

// The pid agent.pid records, or "unknown".
std::string RecordedPid(const std::string& dir) {
  std::ifstream in(absl::StrCat(dir, "/", kPidName));
  std::stringstream text;
  text << in.rdbuf();
  std::string pid(absl::StripAsciiWhitespace(text.str()));
  return pid.empty() ? "unknown" : pid;
}

// Removes what an agent wrote for its ranks: rank-N.env, rank-N.argv and the hostfile.
void RemoveRankFiles(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (d == nullptr) return;
  while (dirent* e = readdir(d.get())) {
    std::string name = e->d_name;
    bool rank_file = absl::StartsWith(name, "rank-") &&
                     (absl::EndsWith(name, ".env") || absl::EndsWith(name, ".argv"));
    if (rank_file || name == "hostfile") unlink(absl::StrCat(dir, "/", name).c_str());
  }
}

enum class Holder { kNobodySays, kLive, kGone };

Holder LockHolder(const std::string& dir) {
  UniqueFd fd(open(LockPath(dir).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return Holder::kNobodySays;
  return flock(fd.get(), LOCK_SH | LOCK_NB) == 0 ? Holder::kGone : Holder::kLive;
}

// Whether `fd` is still the file at `path` (a releasing agent unlinks the lock file while
// another may have opened it: a lock on the unlinked file protects nothing).
bool IsFileAt(int fd, const std::string& path) {
  struct stat by_fd {
  }, by_path{};
  return fstat(fd, &by_fd) == 0 && stat(path.c_str(), &by_path) == 0 &&
         by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

}  // namespace

absl::StatusOr<UniqueFd> ClaimDebugDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + dir, errno);
  const std::string lock = LockPath(dir);
  for (int attempt = 0; attempt < 3; ++attempt) {
    UniqueFd fd(open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (!fd.valid()) return ErrnoStatus("open " + lock, errno);
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return ErrnoStatus("flock " + lock, errno);
      return absl::FailedPreconditionError(
          absl::StrCat(dir, " is in use by the muster agent with pid ", RecordedPid(dir),
                       " on this host; give each agent its own --debug-dir"));
    }
    if (!IsFileAt(fd.get(), lock)) continue;  // released and removed meanwhile: lock anew
    // Our pid replaces the dead agent's in one rename (agent.pid is never missing), then its
    // rank files go: their port is gone.
    RETURN_IF_ERROR(
        WriteFileAtomically(absl::StrCat(dir, "/", kPidName), absl::StrCat(getpid(), "\n")));
    RemoveRankFiles(dir);
    return fd;
  }
  return absl::UnavailableError(absl::StrCat(lock, ": other agents keep taking it; retry"));
}

void ReleaseDebugDir(const std::string& dir) {
  RemoveRankFiles(dir);
  unlink(absl::StrCat(dir, "/", kPidName).c_str());
  unlink(LockPath(dir).c_str());
}

absl::Status CheckDebugDirOwner(const std::string& dir) {
  if (LockHolder(dir) != Holder::kGone) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the files in ", dir, " were written by the muster agent with pid ", RecordedPid(dir),
      ", which has exited without removing them (killed?): the store they name is gone; start "
      "`muster run --debug` again"));
}

}  // namespace muster
