#include "launch/watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "base/errno_status.h"
#include "launch/process_tree.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// Message on the pipe: one op byte ('+', '-', 'X') and a pid, written
// atomically.
struct Message {
  char op;
  pid_t session;
};

void KillSessions(const std::set<pid_t>& sessions) {
  for (pid_t s : sessions) kill(-s, SIGKILL);  // ESRCH: the group is already gone
  // Members that moved to another process group but stayed in the session. Two
  // passes: a member may fork between our scan and its death.
  for (int pass = 0; pass < 2; ++pass) {
    for (pid_t p : FindSessionMembers(sessions)) kill(p, SIGKILL);
  }
}

[[noreturn]] void WatchdogMain(int fd) {
  prctl(PR_SET_NAME, "muster-watchdog");
  setpgid(0, 0);  // out of the agent's group: a group signal to the agent must
                  // not hit us
  std::set<pid_t> sessions;
  Message m;
  for (;;) {
    ssize_t n = read(fd, &m, sizeof(m));
    if (n < 0 && errno == EINTR) continue;
    if (n == sizeof(m)) {
      if (m.op == '+') sessions.insert(m.session);
      if (m.op == '-') sessions.erase(m.session);
      if (m.op == 'X') _exit(0);
      continue;
    }
    break;  // EOF (agent died) or a broken pipe: clean up
  }
  KillSessions(sessions);
  _exit(0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Watchdog>> Watchdog::Start() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  // fork() is safe here: no other thread exists yet (see header), and the child
  // uses only read/kill/opendir and a std::set, never a lock another thread
  // could hold.
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork(watchdog)", errno);
  if (pid == 0) {
    write_end.reset();
    WatchdogMain(read_end.get());
  }
  return std::unique_ptr<Watchdog>(new Watchdog(pid, std::move(write_end)));
}

void Watchdog::Send(char op, pid_t session) {
  Message m{op, session};
  ssize_t n;
  do {
    n = write(pipe_.get(), &m, sizeof(m));
  } while (n < 0 && errno == EINTR);
  if (n != sizeof(m) && !warned_) {
    warned_ = true;
    spdlog::warn(
        "watchdog (pid {}) is gone: workers' children will not be cleaned up "
        "if the "
        "agent is killed with SIGKILL",
        pid_);
  }
}

void Watchdog::Track(pid_t session) { Send('+', session); }
void Watchdog::Untrack(pid_t session) { Send('-', session); }
void Watchdog::Disarm() { Send('X', 0); }

}  // namespace muster
