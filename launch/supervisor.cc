#include "launch/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/exit_codes.h"
#include "base/status_macros.h"
#include "launch/kill_children.h"
#include "launch/pidfd.h"
#include "launch/process_tree.h"
#include "launch/stuck_process.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

pid_t g_supervisor = 0;

// How long the supervisor waits for the agent's exit status once the agent is dead, and for
// the job's last processes after SIGKILL.
constexpr absl::Duration kReapTimeout = absl::Seconds(10);

// ", held by ptrace tracer N" when /proc/PID/status names a tracer, else its state and
// wchan (stuck in the kernel: uninterruptible sleep; launch/stuck_process.h).
std::string HeldBy(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    pid_t tracer = 0;
    if (absl::StartsWith(line, "TracerPid:") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(10)), &tracer) && tracer > 0) {
      return absl::StrCat(": a ptrace tracer (pid ", tracer, ") holds its zombie");
    }
  }
  return absl::StrCat(" (", StuckProcessLine(DescribeStuckProcess(pid)), ")");
}

// Reads every pending signal and sends it on to the agent.
void ForwardSignals(int signal_fd, int agent_pidfd) {
  signalfd_siginfo info;
  for (;;) {
    ssize_t n = read(signal_fd, &info, sizeof(info));
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof(info)) return;  // EAGAIN: drained
    // ESRCH: the agent has exited; its end is handled by the caller next.
    (void)PidfdSignal(agent_pidfd, static_cast<int>(info.ssi_signo));
  }
}

// Exits as the agent did: its code, or its signal (the caller sees the same wait status).
[[noreturn]] void ExitAs(int wstatus) {
  if (WIFEXITED(wstatus)) _exit(WEXITSTATUS(wstatus));
  const int sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : SIGKILL;
  rlimit no_core{0, 0};
  (void)setrlimit(RLIMIT_CORE, &no_core);  // the agent's core, if any, is the one to keep
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(sig);
  _exit(exit_code::ForSignal(sig));  // a signal whose default is not to die
}

// The supervisor's life: forwards signals until the agent exits, then kills and reaps
// everything the agent left (it all came to us, a subreaper) and exits as the agent did.
[[noreturn]] void Supervise(pid_t agent, UniqueFd signal_fd) {
  UniqueFd agent_fd(PidfdOpen(agent));  // our unreaped child: the pid is its own
  if (!agent_fd.valid()) {
    spdlog::error(
        "supervisor: pidfd_open(agent {}): {}; waiting for it without forwarding "
        "signals",
        agent, std::strerror(errno));
  }
  pollfd fds[2] = {{signal_fd.get(), POLLIN, 0}, {agent_fd.get(), POLLIN, 0}};
  while (agent_fd.valid()) {
    // No deadline: the agent lives as long as the job does; its exit is the event.
    int n = poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      spdlog::error("supervisor: poll: {}; waiting for the agent without forwarding signals",
                    std::strerror(errno));
      break;
    }
    if (fds[0].revents & POLLIN) ForwardSignals(signal_fd.get(), agent_fd.get());
    if (fds[1].revents != 0) break;
  }
  // Every wait from here on has a deadline: a dead process whose zombie a ptrace tracer
  // holds cannot be reaped until the tracer lets go, which may be never.
  int wstatus = exit_code::kTransient << 8;
  if (!ReapChild(agent, agent_fd.get(), kReapTimeout, &wstatus)) {
    spdlog::error("supervisor: the agent (pid {}) could not be reaped within {}{}; exiting {}",
                  agent, absl::FormatDuration(kReapTimeout), HeldBy(agent), exit_code::kTransient);
    wstatus = exit_code::kTransient << 8;
  }
  std::vector<pid_t> stuck;
  if (!KillAndReapChildren(kReapTimeout, &stuck)) {
    for (pid_t pid : stuck) {
      spdlog::error("supervisor: process {} of the job was not reaped within {} of SIGKILL{}", pid,
                    absl::FormatDuration(kReapTimeout), HeldBy(pid));
    }
    if (stuck.empty())
      spdlog::error("supervisor: /proc is not mounted: cannot find the job's processes");
  }
  ExitAs(wstatus);
}

}  // namespace

pid_t KnownPid() { return g_supervisor != 0 ? g_supervisor : getpid(); }

absl::StatusOr<Supervisor> SplitOffAgent(const std::vector<int>& forwarded) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : forwarded) sigaddset(&set, sig);
  // Blocked before the fork: a signal that comes meanwhile waits for the signalfd (here)
  // or for the agent's (there), and is not lost.
  sigset_t blocked = set;
  sigaddset(&blocked, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &blocked, nullptr) != 0) return ErrnoStatus("sigprocmask", errno);
  UniqueFd signal_fd(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!signal_fd.valid()) return ErrnoStatus("signalfd", errno);
  // Orphans of the agent's tree come here once the agent is gone.
  RETURN_IF_ERROR(BecomeSubreaper());
  const pid_t supervisor = getpid();
  std::fflush(nullptr);  // nothing buffered is written twice
  pid_t agent = fork();
  if (agent < 0) return ErrnoStatus("fork (the agent under its supervisor)", errno);
  if (agent > 0) {
    // Both sides set the group: whichever runs first, no group signal reaches both.
    (void)setpgid(agent, agent);  // EACCES/ESRCH: the child did it already, or died
    Supervise(agent, std::move(signal_fd));
  }
  signal_fd.reset();
  if (setpgid(0, 0) != 0) return ErrnoStatus("setpgid (the agent's own process group)", errno);
  // Out of the terminal's foreground group: a write to it must not stop the agent (TOSTOP).
  // Workers get every disposition reset before execve.
  signal(SIGTTOU, SIG_IGN);
  Supervisor s{.pid = supervisor, .pidfd = UniqueFd(PidfdOpen(supervisor))};
  // The supervisor may have died before the pidfd existed: then getppid() no longer names it.
  if (!s.pidfd.valid() || getppid() != supervisor) _exit(exit_code::ForSignal(SIGKILL));
  g_supervisor = supervisor;
  return s;
}

}  // namespace muster
