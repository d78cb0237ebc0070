#include "launch/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/errno_status.h"
#include "base/tsan.h"
#include "base/unique_fd.h"

namespace muster {
namespace {

// Reads a small /proc file into `buf`; returns bytes read or -1.
ssize_t ReadSmallFile(const char* path, char* buf, size_t size) {
  UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return -1;
  ssize_t total = 0;
  while (static_cast<size_t>(total) < size - 1) {
    ssize_t n = read(fd.get(), buf + total, size - 1 - total);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    total += n;
  }
  buf[total] = '\0';
  return total;
}

// In TSan builds the sanitizer runtime starts llvm-symbolizer as a child of ours (to
// match suppressions by function name); it is not the job's, and signalling it as a
// leftover would hold every stop for the shutdown timeout.
bool IsSanitizerSymbolizer([[maybe_unused]] long pid) {
#ifdef MUSTER_TSAN
  char path[64], comm[32];
  snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
  return ReadSmallFile(path, comm, sizeof(comm)) > 0 && strcmp(comm, "llvm-symbolizer\n") == 0;
#else
  return false;
#endif
}

}  // namespace

absl::Status BecomeSubreaper() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    return ErrnoStatus("prctl(PR_SET_CHILD_SUBREAPER)", errno);
  return absl::OkStatus();
}

std::vector<pid_t> ListChildren() {
  std::vector<pid_t> children;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return children;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::string path = std::string("/proc/self/task/") + entry->d_name + "/children";
    char buf[16384];
    if (ReadSmallFile(path.c_str(), buf, sizeof(buf)) <= 0) continue;
    char* p = buf;
    while (*p != '\0') {
      char* end;
      long pid = strtol(p, &end, 10);
      if (end == p) break;
      if (!IsSanitizerSymbolizer(pid)) children.push_back(static_cast<pid_t>(pid));
      p = end;
      while (*p == ' ' || *p == '\n') ++p;
    }
  }
  closedir(dir);
  return children;
}

bool ProcessGroupExists(pid_t pgid) {
  if (pgid <= 0) return false;
  // EPERM means the group exists but belongs to someone else: still counts as
  // alive.
  return kill(-pgid, 0) == 0 || errno == EPERM;
}

std::vector<pid_t> FindSessionMembers(const std::set<pid_t>& sessions) {
  std::vector<pid_t> members;
  if (sessions.empty()) return members;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return members;
  // getsid() answers for any pid in one system call, where reading /proc/N/stat took three
  // (open, read, close) for every process on the machine: the scan runs on the way to the
  // SIGKILL after the grace period (B8), and a node runs hundreds of processes.
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    pid_t pid = static_cast<pid_t>(atoi(entry->d_name));
    pid_t session = getsid(pid);
    if (session < 0) continue;  // ESRCH: it exited (and was reaped) since readdir
    if (sessions.count(session)) members.push_back(pid);
  }
  closedir(dir);
  return members;
}

}  // namespace muster
