#include "launch/captured_run.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/exit_codes.h"
#include "base/status_macros.h"
#include "base/unique_fd.h"
#include "base/wait_readable.h"
#include "launch/pidfd.h"

namespace muster {
namespace {

// Reaps `pid`, retrying on EINTR (the agent's signals are blocked or handled elsewhere).
int Reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

absl::StatusOr<CapturedRun> RunCaptured(SpawnSpec spec, absl::Duration timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  spec.fds.push_back({write_end.get(), 1});
  ASSIGN_OR_RETURN(pid_t pid, Spawn(spec));
  write_end.reset();  // the child holds the only write end: EOF once it closed stdout
  // The child may close stdout and run on: its end is awaited with the same deadline.
  UniqueFd pidfd(PidfdOpen(pid));  // -1 (ENOSYS, old kernel): the reap below has none
  const absl::Time deadline = absl::Now() + timeout;
  auto give_up = [&](absl::Status why) {
    kill(pid, SIGKILL);  // not reaped yet, so the pid is still the child's
    Reap(pid);
    return why;
  };
  auto too_late = [&] {
    return absl::DeadlineExceededError(absl::StrCat(spec.argv.empty() ? "" : spec.argv[0],
                                                    " did not finish within ",
                                                    absl::FormatDuration(timeout)));
  };
  CapturedRun run;
  char buf[4096];
  for (;;) {
    int ready = WaitReadable(read_end.get(), deadline);
    if (ready < 0) return give_up(ErrnoStatus("poll", errno));
    if (ready == 0) return give_up(too_late());
    ssize_t n = read(read_end.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return give_up(ErrnoStatus("read", errno));
    if (n == 0) break;
    run.out.append(buf, static_cast<size_t>(n));
  }
  if (pidfd.get() >= 0) {
    int ended = WaitReadable(pidfd.get(), deadline);
    if (ended < 0) return give_up(ErrnoStatus("poll", errno));
    if (ended == 0) return give_up(too_late());
  }
  int status = Reap(pid);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : exit_code::ForSignal(WTERMSIG(status));
  return run;
}

}  // namespace muster
