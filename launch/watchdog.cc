#include "launch/watchdog.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/random_id.h"
#include "launch/cgroup.h"
#include "launch/pidfd.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// The fd the watchdog's end is moved to before every other fd is closed.
constexpr int kWatchdogFd = 3;
// More workers than one node runs; beyond it a worker goes untracked (and is still killed
// by PDEATHSIG, its session by nobody).
constexpr int kMaxTracked = 4096;

struct Tracked {
  pid_t pid;
  int pidfd;
};

// Everything below runs in the watchdog: async-signal-safe only (no allocation, no lock).
Tracked g_tracked[kMaxTracked];
int g_count = 0;

void Forget(pid_t pid) {
  for (int i = 0; i < g_count; ++i) {
    if (g_tracked[i].pid != pid) continue;
    close(g_tracked[i].pidfd);
    g_tracked[i] = g_tracked[--g_count];
    return;
  }
}

// Session `t.pid` is still the job's: its leader is not reaped, or no other process has
// taken its number (a session's id is its leader's pid).
bool SessionIsOurs(const Tracked& t) {
  if (PidfdUnreaped(t.pidfd) != 0) return true;
  int other = PidfdOpen(t.pid);
  if (other < 0) return errno == ESRCH;
  close(other);
  return false;
}

// Whether process `pid` is in a tracked session that is still the job's.
bool InTrackedSession(pid_t pid) {
  pid_t sid = getsid(pid);
  if (sid <= 0) return false;  // gone (ESRCH): nothing to kill
  for (int i = 0; i < g_count; ++i) {
    if (g_tracked[i].pid == sid) return SessionIsOurs(g_tracked[i]);
  }
  return false;
}

// Whether /proc/<pid>/environ holds `mark` as one whole entry. Reads in chunks, keeping the
// tail of the previous chunk, into a static buffer (async-signal-safe: no allocation).
bool HasMark(pid_t pid, const char* mark, size_t mark_len) {
  char path[32] = "/proc/";
  char digits[12];
  int d = 0;
  for (pid_t v = pid; v > 0 && d < 11; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
  size_t at = 6;
  while (d > 0) path[at++] = digits[--d];
  memcpy(path + at, "/environ", 9);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  static char buf[65536 + 1];
  // buf[0] is a NUL standing in for the entry before the first; the kept tail follows it.
  size_t kept = 0;
  bool found = false;
  buf[0] = '\0';
  for (;;) {
    ssize_t n = read(fd, buf + 1 + kept, sizeof(buf) - 1 - kept);
    if (n <= 0) break;
    size_t len = kept + static_cast<size_t>(n);
    // An entry starts after a NUL and ends with one (environ ends every entry with a NUL).
    for (size_t i = 0; !found && i + mark_len < len; ++i) {
      found = buf[i] == '\0' && memcmp(buf + 1 + i, mark, mark_len) == 0 &&
              buf[1 + i + mark_len] == '\0';
    }
    if (found) break;
    // Keep what a mark split across two reads needs: its start and the byte before it. A
    // match starting at the kept tail's first byte lies wholly in this chunk, checked
    // already, so the byte before the tail reads as "not a NUL".
    if (len <= mark_len + 1) {
      kept = len;  // a short read: keep everything, the byte before it too
      continue;
    }
    kept = mark_len + 1;
    memmove(buf + 1, buf + 1 + len - kept, kept);
    buf[0] = 'x';
  }
  close(fd);
  return found;
}

// One pass over /proc: SIGKILL, through a pidfd, to every process in a tracked session
// and, given a mark (mode "session"), to every process whose environment carries it:
// descendants of the workers that left their sessions.
void KillJobProcesses(const char* mark, size_t mark_len) {
  int dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char entries[8192];
  long n;
  const pid_t self = getpid();
  while ((n = syscall(SYS_getdents64, dir, entries, sizeof(entries))) > 0) {
    for (long off = 0; off < n;) {
      const char* name = entries + off + 19;  // struct linux_dirent64: d_name at offset 19
      off += *reinterpret_cast<const unsigned short*>(entries + off + 16);
      if (*name < '1' || *name > '9') continue;
      pid_t pid = static_cast<pid_t>(atoi(name));
      if (pid == self) continue;
      // The pidfd first: if the number is reused after it, the session and environment
      // read are the new process's, and the signal goes to the old one, which is gone
      // (nothing is hit).
      int fd = PidfdOpen(pid);
      if (fd < 0) continue;
      if (InTrackedSession(pid) || (mark_len > 0 && HasMark(pid, mark, mark_len))) {
        PidfdSignal(fd, SIGKILL);
      }
      close(fd);
    }
  }
  close(dir);
}

// Two passes: a session member or a marked process may fork between the scan and its death.
void KillJob(const char* mark, size_t mark_len) {
  for (int pass = 0; pass < 2; ++pass) KillJobProcesses(mark, mark_len);
  for (int i = 0; i < g_count; ++i) PidfdSignal(g_tracked[i].pidfd, SIGKILL);
}

// Keeps a helper from preempting the agent whenever the agent wakes it (SCHED_BATCH: no
// wake-up preemption, the same CPU share as before). The agent writes to the watchdog while
// it stops and exits; with preemption each write cost it the watchdog's run time (B8).
void DoNotPreemptOnWakeUp() {
  sched_param param{};
  // Best effort: without it the helper only runs a little earlier than it needs to.
  (void)sched_setscheduler(0, SCHED_BATCH, &param);
}

[[noreturn]] void WatchdogMain(int fd, const char* cgroup_dir, const char* mark) {
  if (fd != kWatchdogFd) {
    dup2(fd, kWatchdogFd);
    fd = kWatchdogFd;
  }
  // Nothing of the agent's stays open here (listening sockets, pipes, pidfds of the last
  // watchdog's generation): only stdio and our end of the socket.
  syscall(SYS_close_range, kWatchdogFd + 1, ~0U, 0);
  prctl(PR_SET_NAME, "muster-watchdog");
  setpgid(0, 0);  // out of the agent's group: a group signal to the agent must not hit us
  DoNotPreemptOnWakeUp();
  for (;;) {
    char op = 0;
    pid_t pid = 0;
    int pidfd = -1;
    ssize_t n = ReceivePidAndPidfd(fd, &op, &pid, &pidfd);
    if (n <= 0) break;  // EOF: the agent died
    if (op == 'X') _exit(0);
    if (op == '+' && pidfd >= 0 && g_count < kMaxTracked) {
      g_tracked[g_count++] = Tracked{pid, pidfd};
    } else {
      if (pidfd >= 0) close(pidfd);
      if (op == '-') Forget(pid);
    }
  }
  if (cgroup_dir[0] != '\0') KillAndRemoveCgroupTree(cgroup_dir, 10000);
  // The mark is for mode "session": in a cgroup nothing can be outside the job's cgroup.
  KillJob(mark, cgroup_dir[0] == '\0' ? strlen(mark) : 0);
  _exit(0);
}

}  // namespace

Watchdog::Watchdog(std::string cgroup_dir)
    : cgroup_dir_(std::move(cgroup_dir)),
      mark_(absl::StrCat("MUSTER_AGENT_MARK=", getpid(), ".", RandomHex(8))) {}

absl::StatusOr<std::unique_ptr<Watchdog>> Watchdog::Start(std::string cgroup_dir) {
  std::unique_ptr<Watchdog> w(new Watchdog(std::move(cgroup_dir)));
  if (absl::Status s = w->Fork(); !s.ok()) return s;
  return w;
}

absl::Status Watchdog::Fork() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return ErrnoStatus("socketpair", errno);
  }
  UniqueFd agent_end(fds[0]), watchdog_end(fds[1]);
  // The agent's end never blocks: a watchdog that stops reading (SIGSTOPped, hung) must not
  // stop the agent's loop once the socket is full (issue 31 item 3). Spawn children write
  // to this end too (SpawnSpec::report_fd); they share its O_NONBLOCK.
  const int flags = fcntl(agent_end.get(), F_GETFL);
  if (flags < 0 || fcntl(agent_end.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return ErrnoStatus("fcntl(O_NONBLOCK) on the watchdog's socket", errno);
  }
  const char* cgroup_dir = cgroup_dir_.c_str();
  const char* mark = mark_.c_str();
#ifdef MUSTER_TSAN
  pid_t pid = fork();  // TSan intercepts fork, not _Fork
#else
  // No atfork handlers (gRPC's, the allocator's): the child runs only async-signal-safe
  // code, so it is safe after threads exist.
  pid_t pid = _Fork();
#endif
  if (pid < 0) return ErrnoStatus("fork(watchdog)", errno);
  if (pid == 0) {
    close(agent_end.get());
    WatchdogMain(watchdog_end.get(), cgroup_dir, mark);
  }
  pid_ = pid;
  socket_ = std::move(agent_end);
  warned_ = false;
  stuck_ = false;
  return absl::OkStatus();
}

absl::Status Watchdog::Restart() {
  if (disarmed_) return absl::OkStatus();
  return Fork();
}

void Watchdog::Send(char op, pid_t pid, int pidfd) {
  if (stuck_) return;  // killed; its successor gets every live worker (TrackAgain)
  if (SendPidAndPidfd(socket_.get(), op, pid, pidfd) == 0) return;
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    KillStuck();
    return;
  }
  if (warned_) return;
  warned_ = true;
  spdlog::warn("watchdog (pid {}) is gone: it is being restarted", pid_);
}

void Watchdog::KillStuck() {
  stuck_ = true;
  // Our unreaped child: the pid is its own. SIGKILL ends a stopped process too; the agent
  // reaps it and starts a new one (Restart), unless it is disarmed.
  (void)kill(pid_, SIGKILL);
  if (disarmed_) return;
  spdlog::warn(
      "watchdog (pid {}) stopped reading its socket (SIGSTOPped or hung): killed; a new one "
      "is started",
      pid_);
}

void Watchdog::CheckBacklog() {
  if (stuck_) return;
  // Three quarters of the send buffer unread (some 200 datagrams: SIOCOUTQ counts their
  // kernel size; main's agent blocked at 288): the watchdog has not run for many attempts,
  // and a spawn child's report may have been dropped (EAGAIN) when it was full; only a new
  // watchdog is sure to know every worker.
  int queued = 0, sndbuf = 0;
  socklen_t len = sizeof(sndbuf);
  if (ioctl(socket_.get(), SIOCOUTQ, &queued) == 0 &&
      getsockopt(socket_.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) == 0 &&
      queued > sndbuf / 4 * 3) {
    KillStuck();
  }
}

void Watchdog::Track(pid_t pid, int pidfd) { Send('+', pid, pidfd); }

void Watchdog::Untrack(absl::Span<const pid_t> pids) {
  for (pid_t pid : pids) Send('-', pid);
}

void Watchdog::Disarm() {
  disarmed_ = true;
  Send('X', 0);
}

bool Watchdog::ReapIfGone() {
  int wstatus = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &wstatus, WNOHANG);
  } while (r < 0 && errno == EINTR);
  // ECHILD: already reaped (by the agent's SIGCHLD handling); 0: still running.
  return r == pid_ || (r < 0 && errno == ECHILD);
}

}  // namespace muster
