#include "launch/watchdog.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <vector>

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

// Keeps a helper from preempting the agent whenever the agent wakes it (SCHED_BATCH: no
// wake-up preemption, the same CPU share as before). The agent writes to the watchdog while
// it stops and exits; with preemption each write cost it the watchdog's run time (B8).
void DoNotPreemptOnWakeUp() {
  sched_param param{};
  // Best effort: without it the helper only runs a little earlier than it needs to.
  (void)sched_setscheduler(0, SCHED_BATCH, &param);
}

[[noreturn]] void WatchdogMain(int fd) {
  prctl(PR_SET_NAME, "muster-watchdog");
  setpgid(0, 0);  // out of the agent's group: a group signal to the agent must
                  // not hit us
  DoNotPreemptOnWakeUp();
  std::set<pid_t> sessions;
  // Whole messages only: every write is a multiple of sizeof(Message) of at most PIPE_BUF
  // bytes (atomic), and so is this buffer.
  Message batch[PIPE_BUF / sizeof(Message)];
  for (;;) {
    ssize_t n = read(fd, batch, sizeof(batch));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || n % sizeof(Message) != 0) break;  // EOF (agent died) or a broken pipe
    for (size_t i = 0; i < n / sizeof(Message); ++i) {
      const Message& m = batch[i];
      if (m.op == '+') sessions.insert(m.session);
      if (m.op == '-') sessions.erase(m.session);
      if (m.op == 'X') _exit(0);
    }
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
  Write(&m, sizeof(m));
}

void Watchdog::Write(const void* data, size_t size) {
  ssize_t n;
  do {
    n = write(pipe_.get(), data, size);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(size) && !warned_) {
    warned_ = true;
    spdlog::warn(
        "watchdog (pid {}) is gone: workers' children will not be cleaned up "
        "if the "
        "agent is killed with SIGKILL",
        pid_);
  }
}

void Watchdog::Track(pid_t session) { Send('+', session); }

void Watchdog::Untrack(absl::Span<const pid_t> sessions) {
  // Writes of up to PIPE_BUF bytes are atomic, so the watchdog never reads half a message.
  constexpr size_t kPerWrite = PIPE_BUF / sizeof(Message);
  std::vector<Message> batch;
  batch.reserve(std::min(sessions.size(), kPerWrite));
  for (size_t i = 0; i < sessions.size(); ++i) {
    batch.push_back(Message{'-', sessions[i]});
    if (batch.size() == kPerWrite || i + 1 == sessions.size()) {
      Write(batch.data(), batch.size() * sizeof(Message));
      batch.clear();
    }
  }
}

void Watchdog::Disarm() { Send('X', 0); }

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
