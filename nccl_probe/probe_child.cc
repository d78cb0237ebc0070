#include "nccl_probe/probe_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/duration.h"
#include "base/errno_status.h"
#include "base/unique_fd.h"

namespace muster::probe {
namespace {

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;  // retry: nothing was written
    if (n <= 0) return;                     // parent gone (EPIPE): nobody is listening
    done += static_cast<size_t>(n);
  }
}

[[noreturn]] void ChildMain(int parent, int fd, const ChildWork& work) {
  // Die with the parent: an agent killed mid-probe must not leave us behind.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  // Drivers may print; stdout belongs to the parent's table/JSON.
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  std::string payload = work([fd](const std::string& stage) { WriteAll(fd, "S " + stage + "\n"); });
  WriteAll(fd, "R " + payload + "\n");
  ::_exit(0);
}

// Reaps `pid` within `limit`; false if it is still there (stuck in the kernel).
bool Reap(pid_t pid, absl::Duration limit, int* wait_status) {
  const absl::Time deadline = absl::Now() + limit;
  while (true) {
    pid_t r = ::waitpid(pid, wait_status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;  // ECHILD: already reaped
    if (absl::Now() >= deadline) return false;
    ::usleep(2000);
  }
}

std::string During(const std::string& stage) {
  return stage.empty() ? "" : absl::StrCat(" during ", stage);
}

}  // namespace

absl::StatusOr<std::string> RunInChild(const ChildWork& work, absl::Duration timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    read_end.reset();
    ChildMain(parent, write_end.get(), work);
  }
  write_end.reset();

  const absl::Time deadline = absl::Now() + timeout;
  std::string buffer, stage, payload;
  bool have_report = false, timed_out = false;
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) {
      timed_out = true;
      break;
    }
    pollfd p = {read_end.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1000)));
    if (ready < 0 && errno == EINTR) continue;  // a signal: recompute the wait
    if (ready < 0) return ErrnoStatus("poll", errno);
    if (ready == 0) continue;
    char chunk[65536];
    ssize_t n = ::read(read_end.get(), chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed the pipe (exited)
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1)) {
      std::string line = buffer.substr(0, nl);
      if (line.rfind("S ", 0) == 0) stage = line.substr(2);
      if (line.rfind("R ", 0) == 0) {
        payload = line.substr(2);
        have_report = true;
      }
    }
  }
  int status = 0;
  if (!timed_out &&
      !Reap(pid, std::max(deadline - absl::Now(), absl::Milliseconds(100)), &status)) {
    timed_out = true;
  }
  if (timed_out) {
    ::kill(pid, SIGKILL);
    std::string stuck;
    if (!Reap(pid, absl::Seconds(2), &status)) {
      stuck = absl::StrCat("; pid ", pid, " did not die (stuck in the kernel driver?)");
    }
    return absl::DeadlineExceededError(absl::StrCat(
        "probe timed out after ", HumanDuration(timeout), During(stage), " and was killed", stuck));
  }
  if (WIFSIGNALED(status)) {
    return absl::InternalError(absl::StrCat("probe child killed by signal ", WTERMSIG(status), " (",
                                            strsignal(WTERMSIG(status)), ")", During(stage)));
  }
  if (!have_report) {
    return absl::InternalError(absl::StrCat("probe child exited with status ", WEXITSTATUS(status),
                                            " without a report", During(stage)));
  }
  return payload;
}

}  // namespace muster::probe
