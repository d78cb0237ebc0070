#include "launch/kill_children.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "base/wait_readable.h"
#include "launch/pidfd.h"
#include "launch/process_tree.h"

namespace muster {
namespace {

// Readable (or poll failed: the caller's waitpid tells) before `deadline`; false on timeout.
bool ReadableBy(int fd, absl::Time deadline) { return WaitReadable(fd, deadline) != 0; }

// Waits until the killed child behind `pidfd` has exited (its pidfd reads), then reaps it,
// all up to `deadline`. A dead child whose zombie a ptrace tracer holds cannot be reaped
// until the tracer waits for it or detaches (its pidfd reads all the same); the kernel then
// sends us SIGCHLD, which `sigchld` (a signalfd) turns into an event. False on timeout.
bool ReapKilled(pid_t pid, int pidfd, int sigchld, absl::Time deadline, int* wstatus) {
  if (pidfd >= 0 && !ReadableBy(pidfd, deadline)) return false;
  for (;;) {
    pid_t r;
    do {
      r = waitpid(pid, wstatus, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (sigchld < 0 || !ReadableBy(sigchld, deadline)) return false;
    signalfd_siginfo info;
    while (read(sigchld, &info, sizeof(info)) == sizeof(info)) {
    }
  }
}

// SIGCHLD blocked in the calling thread and readable through a signalfd, for as long as it
// lives; the mask is restored then. A SIGCHLD read here is one the caller no longer needs:
// the children it would announce are the ones being reaped.
class SigchldEvents {
 public:
  SigchldEvents() {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &chld, &old_);
    fd_.reset(signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC));
  }
  ~SigchldEvents() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  int fd() const { return fd_.get(); }

 private:
  sigset_t old_;
  UniqueFd fd_;
};

}  // namespace

bool ReapChild(pid_t pid, int pidfd, absl::Duration timeout, int* wstatus) {
  SigchldEvents sigchld;
  return ReapKilled(pid, pidfd, sigchld.fd(), absl::Now() + timeout, wstatus);
}

bool KillAndReapChildren(absl::Duration timeout, std::vector<pid_t>* stuck) {
  const absl::Time deadline = absl::Now() + timeout;
  if (stuck != nullptr) stuck->clear();
  if (access("/proc/self/task", F_OK) != 0) return false;
  SigchldEvents sigchld;
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
    std::vector<pid_t> left;
    for (const auto& [child, fd] : killed) {
      if (!ReapKilled(child, fd.get(), sigchld.fd(), deadline, nullptr)) left.push_back(child);
    }
    if (!left.empty() && absl::Now() >= deadline) {
      if (stuck != nullptr) *stuck = std::move(left);
      return false;
    }
  }
}

}  // namespace muster
