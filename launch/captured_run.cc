#include "launch/captured_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/duration.h"
#include "base/errno_status.h"
#include "base/status_macros.h"
#include "launch/pidfd.h"
#include "launch/reaper.h"

namespace muster {
namespace {

// One child being awaited.
struct AwaitedHelper {
  HelperChild child;
  UniqueFd pidfd;       // -1 (ENOSYS: an old kernel): its end is learnt by the reap alone
  bool exited = false;  // its pidfd read: it has ended (reaped below)
  HelperResult result;
};

// A wait status waitpid never writes: left untouched, it says the child was reaped elsewhere.
constexpr int kNoWaitStatus = -1;

// Reads what `a` wrote, once its output polled ready.
void ReadHelperOutput(AwaitedHelper& a, size_t max_output) {
  char buf[65536];
  ssize_t n = read(a.child.out.get(), buf, sizeof buf);
  if (n < 0 && errno == EINTR) return;  // look again on the next round
  if (n < 0) a.result.error = ErrnoStatus("read", errno);
  if (n <= 0) {
    a.result.output_ended = true;
    return;
  }
  size_t keep = std::min(static_cast<size_t>(n), max_output - a.result.out.size());
  a.result.out.append(buf, keep);
  if (a.result.out.size() >= max_output) a.result.output_ended = true;
}

// Kills `a` unless it ended by itself, then reaps it within the grace and decodes how it
// ended.
void FinishHelper(AwaitedHelper& a, absl::Duration kill_grace) {
  HelperResult& r = a.result;
  if (!r.output_ended || !a.exited) {
    // Not reaped yet, so the pid is still its own; the pidfd says so whatever happens.
    int sent = a.pidfd.valid() ? PidfdSignal(a.pidfd.get(), SIGKILL) : kill(a.child.pid, SIGKILL);
    (void)sent;  // ESRCH: it ended on its own meanwhile; the reap below says how
    // Without a pidfd the end of a child whose output ended is only seen by the reap: it
    // counts as timed out only if the reap says it was still running.
    r.timed_out = a.pidfd.valid() || !r.output_ended;
  }
  int wstatus = kNoWaitStatus;
  r.reaped =
      ReapChildWithin(a.child.pid, r.timed_out ? kill_grace : absl::ZeroDuration(), &wstatus);
  if (!r.reaped && !r.timed_out) {  // no pidfd, output ended, still running
    r.timed_out = true;
    kill(a.child.pid, SIGKILL);
    r.reaped = ReapChildWithin(a.child.pid, kill_grace, &wstatus);
  }
  if (r.reaped && wstatus != kNoWaitStatus) r.exit = ExitStatus::FromWaitStatus(wstatus);
}

}  // namespace

absl::StatusOr<HelperChild> StartHelper(SpawnSpec spec, HelperOutput output) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
  HelperChild child;
  child.out = UniqueFd(fds[0]);
  UniqueFd write_end(fds[1]);
  spec.fds.push_back({write_end.get(), 1});
  if (output == HelperOutput::kStdoutAndStderr) spec.fds.push_back({write_end.get(), 2});
  ASSIGN_OR_RETURN(child.pid, Spawn(spec));
  // write_end closes here: the child holds the only one, so EOF comes once it closed it.
  return child;
}

absl::StatusOr<HelperChild> ForkHelper(const std::function<int(int out)>& body) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
  HelperChild child;
  child.out = UniqueFd(fds[0]);
  UniqueFd write_end(fds[1]);
  const pid_t parent = getpid();
  child.pid = fork();
  if (child.pid < 0) return ErrnoStatus("fork", errno);
  if (child.pid == 0) {
    child.out.reset();
    // Die with the parent: a caller killed meanwhile must not leave this child behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // it died before the line above took effect
    _exit(body(write_end.get()));
  }
  return child;
}

std::vector<HelperResult> AwaitHelpers(std::vector<HelperChild> children, absl::Time deadline,
                                       const AwaitOptions& options) {
  std::vector<AwaitedHelper> awaited(children.size());
  for (size_t i = 0; i < children.size(); ++i) {
    awaited[i].child = std::move(children[i]);
    awaited[i].pidfd = UniqueFd(PidfdOpen(awaited[i].child.pid));  // unreaped: its own pid
  }
  for (;;) {
    // Each child's output until it ends, then its pidfd until it exits.
    std::vector<pollfd> polled;
    std::vector<AwaitedHelper*> owners;
    for (AwaitedHelper& a : awaited) {
      if (!a.result.output_ended) {
        polled.push_back({.fd = a.child.out.get(), .events = POLLIN, .revents = 0});
      } else if (!a.exited && a.pidfd.valid()) {
        polled.push_back({.fd = a.pidfd.get(), .events = POLLIN, .revents = 0});
      } else {
        a.exited = true;  // without a pidfd its end is learnt by the reap
        continue;
      }
      owners.push_back(&a);
    }
    const absl::Duration left = deadline - absl::Now();
    if (polled.empty() || left <= absl::ZeroDuration()) break;
    // Rounded up: a wait that ends a little early only costs one more round.
    int n =
        poll(polled.data(), polled.size(), static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (n < 0 && errno == EINTR) continue;  // a signal arrived; look again
    if (n < 0) {  // cannot wait: what came so far is the answer, the rest is killed
      for (AwaitedHelper* a : owners) a->result.error = ErrnoStatus("poll", errno);
      break;
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      AwaitedHelper& a = *owners[i];
      if (a.result.output_ended) {
        a.exited = true;
      } else {
        ReadHelperOutput(a, options.max_output);
      }
    }
  }
  std::vector<HelperResult> results;
  results.reserve(awaited.size());
  for (AwaitedHelper& a : awaited) {
    FinishHelper(a, options.kill_grace);
    results.push_back(std::move(a.result));
  }
  return results;
}

absl::StatusOr<CapturedRun> RunCaptured(SpawnSpec spec, absl::Duration timeout) {
  std::string name = spec.argv.empty() ? "" : spec.argv[0];
  ASSIGN_OR_RETURN(HelperChild child, StartHelper(std::move(spec)));
  std::vector<HelperChild> one;
  one.push_back(std::move(child));
  HelperResult r = std::move(AwaitHelpers(std::move(one), absl::Now() + timeout)[0]);
  if (!r.error.ok()) return r.error;
  if (r.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        name,
        r.output_ended ? " closed its output but did not exit within " : " did not finish within ",
        HumanDuration(timeout)));
  }
  // Not reaped here (the agent's reaper came first): how it ended is unknown.
  if (!r.exit) return absl::UnknownError(absl::StrCat(name, " was reaped elsewhere"));
  return CapturedRun{.exit_code = r.exit->code(), .out = std::move(r.out)};
}

}  // namespace muster
