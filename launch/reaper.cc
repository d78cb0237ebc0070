#include "launch/reaper.h"

#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>

#include "absl/time/clock.h"
#include "base/unique_fd.h"
#include "launch/pidfd.h"

namespace muster {

int ReapExitedChildren(const std::function<void(pid_t pid, int wstatus)>& on_exit) {
  int reaped = 0;
  for (;;) {
    int wstatus = 0;
    pid_t pid = waitpid(-1, &wstatus, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    // 0: children are left but none has exited; ECHILD: there are no children at all.
    // Both end the loop; no other errno is possible with these arguments.
    if (pid <= 0) break;
    ++reaped;
    on_exit(pid, wstatus);
  }
  return reaped;
}

bool ReapChildWithin(pid_t pid, absl::Duration timeout, int* wstatus) {
  const absl::Time deadline = absl::Now() + timeout;
  UniqueFd fd(PidfdOpen(pid));  // unreaped: the pid is its own
  for (;;) {
    pid_t r = waitpid(pid, wstatus, WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    // 0: not reapable yet. Once its pidfd reads, it has exited: then only a tracer keeps it.
    const int ms = static_cast<int>(
        absl::ToInt64Milliseconds(std::max(deadline - absl::Now(), absl::ZeroDuration())));
    pollfd p{fd.get(), POLLIN, 0};
    if (!fd.valid() || ms == 0) return false;
    int n = poll(&p, 1, ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // still running at the deadline
    r = waitpid(pid, wstatus, WNOHANG);
    return r == pid || (r < 0 && errno == ECHILD);
  }
}

}  // namespace muster
