#include "launch/kill_children.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "launch/pidfd.h"
#include "launch/process_tree.h"

namespace muster {
namespace {

// Waits until the killed child behind `pidfd` has exited (its pidfd reads), up to
// `deadline`, then reaps it. False on timeout.
bool ReapKilled(pid_t pid, const UniqueFd& pidfd, absl::Time deadline) {
  if (pidfd.valid()) {
    for (;;) {
      pollfd p{pidfd.get(), POLLIN, 0};
      int ms = static_cast<int>(
          absl::ToInt64Milliseconds(std::max(deadline - absl::Now(), absl::ZeroDuration())));
      int n = poll(&p, 1, ms);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) return false;
      break;  // readable (or poll failed: waitpid below tells)
    }
  }
  pid_t r;
  do {
    r = waitpid(pid, nullptr, pidfd.valid() ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  return r == pid || (r < 0 && errno == ECHILD);
}

}  // namespace

bool KillAndReapChildren(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  if (access("/proc/self/task", F_OK) != 0) return false;
  for (;;) {
    std::vector<pid_t> children = ListChildren();
    if (children.empty()) return true;
    // Every child is unreaped (only its parent reaps it), so its pid and pidfd are its own.
    std::vector<std::pair<pid_t, UniqueFd>> killed;
    killed.reserve(children.size());
    for (pid_t child : children) {
      UniqueFd fd(PidfdOpen(child));
      // Without a pidfd (none should fail for an unreaped child) its pid is as good. A
      // failure is ESRCH: it has exited already, and is reaped below all the same.
      (void)(fd.valid() ? PidfdSignal(fd.get(), SIGKILL) : kill(child, SIGKILL));
      killed.emplace_back(child, std::move(fd));
    }
    bool all = true;
    for (const auto& [child, fd] : killed) all = ReapKilled(child, fd, deadline) && all;
    if (!all && absl::Now() >= deadline) return false;
  }
}

}  // namespace muster
