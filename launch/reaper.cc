#include "launch/reaper.h"

#include <sys/wait.h>

#include <cerrno>

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

}  // namespace muster
