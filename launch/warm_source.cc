#include "launch/warm_source.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/errno_status.h"
#include "base/status_macros.h"
#include "launch/pidfd.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// `python -c` this: compiles the source (argv[1]) under kWarmTemplateFileName.
std::string WarmTemplateLoader() {
  return absl::StrCat("import sys; exec(compile(sys.argv.pop(1), '", kWarmTemplateFileName,
                      "', 'exec'))");
}

// Sends `data` with `fds` (SCM_RIGHTS) as one datagram.
absl::Status SendWithFds(int socket, const std::string& data, const int* fds, size_t nfds) {
  iovec iov{const_cast<char*>(data.data()), data.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
  memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
  ssize_t n;
  do {
    n = sendmsg(socket, &msg, MSG_NOSIGNAL);  // EPIPE, not SIGPIPE, when the template is gone
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoStatus("sendmsg to the warm template", errno);
  return absl::OkStatus();
}

// One datagram within `timeout`. Unavailable when the template closed its end (exited).
absl::StatusOr<std::string> ReceiveAnswer(int socket, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  pollfd p{.fd = socket, .events = POLLIN, .revents = 0};
  for (;;) {
    int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    int r = poll(&p, 1, std::max(ms, 0));
    if (r < 0 && errno == EINTR) continue;  // a signal for the signalfd: keep waiting
    if (r < 0) return ErrnoStatus("poll on the warm template's socket", errno);
    if (r == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("the warm template did not answer within ", absl::FormatDuration(timeout)));
    }
    break;
  }
  char buf[4096];
  ssize_t n;
  do {
    n = recv(socket, buf, sizeof(buf), 0);
  } while (n < 0 && errno == EINTR);
  // ECONNRESET: it exited with our request unread (an import failed, see its traceback).
  if (n < 0 && errno != ECONNRESET) return ErrnoStatus("recv from the warm template", errno);
  if (n <= 0) return absl::UnavailableError("the warm template exited");
  return std::string(buf, n);
}

}  // namespace

absl::StatusOr<std::unique_ptr<WarmSource>> WarmSource::Create(Options options) {
  ASSIGN_OR_RETURN(Template first, SpawnTemplate(options));
  return std::unique_ptr<WarmSource>(new WarmSource(std::move(options), std::move(first)));
}

absl::StatusOr<WarmSource::Template> WarmSource::SpawnTemplate(const Options& options) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return ErrnoStatus("socketpair", errno);
  }
  UniqueFd ours(pair[0]), theirs(pair[1]);
  // Compiled under a name of its own, so that its frames below a rank's script (in a
  // traceback of `muster stacks`) say where they come from.
  SpawnSpec spec{.argv = {options.python_exec, "-u", "-c", WarmTemplateLoader(),
                          kWarmTemplateSource, "3", nlohmann::json(options.env).dump()},
                 .env = options.env,
                 .fds = {{theirs.get(), 3}}};
  spec.argv.insert(spec.argv.end(), options.preload.begin(), options.preload.end());
  ASSIGN_OR_RETURN(pid_t pid, Spawn(spec));
  spdlog::info("warm start: template pid {} imports {}", pid,
               options.preload.empty() ? "nothing" : absl::StrJoin(options.preload, ", "));
  // Our child, not reaped yet (reaping happens on this thread): the pid is its own.
  return Template{.pid = pid,
                  .pidfd = UniqueFd(PidfdOpen(pid)),
                  .socket = std::move(ours),
                  .deadline = absl::Now() + options.first_reply};
}

WarmSource::WarmSource(Options options, Template first)
    : options_(std::move(options)), template_(std::move(first)) {}

void WarmSource::Retire(std::string_view why) {
  // Stuck or gone: it is never asked again. ESRCH: it has exited already.
  if (template_.pidfd.valid()) PidfdSignal(template_.pidfd.get(), SIGKILL);
  spdlog::warn("warm start: template pid {} retired: {}", template_.pid, why);
  retired_why_ = std::string(why);
  // One that has made ranks before is replaced (it imports while this attempt's workers are
  // exec'd); one that never answered would fail the same way again.
  bool replace = answered_once_ && replacements_ < kMaxReplacements;
  template_ = Template{};
  answered_once_ = false;
  if (!replace) return;
  absl::StatusOr<Template> next = SpawnTemplate(options_);
  if (!next.ok()) {
    spdlog::warn("warm start: no new template: {}", next.status().ToString());
    return;
  }
  ++replacements_;
  template_ = *std::move(next);
}

// EOF on its socket ends a ready template; one still importing would read it only when its
// imports are done, so it is killed. The agent reaps it (it is an orphan to the reaper).
WarmSource::~WarmSource() {
  if (!template_.ready && template_.pidfd.valid()) PidfdSignal(template_.pidfd.get(), SIGKILL);
}

int WarmSource::importing_fd() const {
  return template_.socket.valid() && !template_.ready ? template_.socket.get() : -1;
}

std::string WarmSource::WhyNotWarm(const SpawnSpec& spec) const {
  if (!template_.socket.valid()) return absl::StrCat("no template (", retired_why_, ")");
  if (spec.argv.size() < 3 || spec.argv[0] != options_.python_exec || spec.argv[1] != "-u") {
    return "the worker's command is not `python -u ...`";
  }
  if (spec.argv[2] == "-m" && spec.argv.size() < 4) return "-m without a module";
  if (spec.preferred_memory_node >= 0) return "a NUMA memory policy is not applied to a fork";
  if (spec.parent_death_signal != SIGKILL) return "the worker's parent-death signal is not SIGKILL";
  return "";
}

absl::StatusOr<WorkerSource::Started> WarmSource::Start(const SpawnSpec& spec,
                                                        const WorkerContainment& containment,
                                                        int stdout_fd, int stderr_fd) {
  SpawnSpec contained = ContainedSpawnSpec(spec, containment);
  std::string why = WhyNotWarm(contained);
  if (why.empty()) why = Ready();
  if (why.empty()) {
    absl::StatusOr<Forked> forked = Fork(contained, stdout_fd, stderr_fd);
    if (forked.ok()) {
      Started& started = forked->started;
      absl::Status contain = Contain(started.pid, started.pidfd.get(), containment);
      if (!contain.ok()) {
        // It never ran job code (it waits for the byte); reaped and reported as usual.
        PidfdSignal(started.pidfd.get(), SIGKILL);
        return contain;
      }
      // The go byte: the rank runs the job's code from here on. EPIPE: the rank died before
      // it (killed); its exit is reaped and reported like any other.
      ssize_t n;
      do {
        n = send(forked->go.get(), "g", 1, MSG_NOSIGNAL);
      } while (n < 0 && errno == EINTR);
      return std::move(started);
    }
    if (!absl::IsFailedPrecondition(forked.status())) return forked.status();
    why = std::string(forked.status().message());
  }
  NoteFallback(why);
  absl::StatusOr<Started> execd = exec_.Start(spec, containment, stdout_fd, stderr_fd);
  if (execd.ok()) execd->fallback = why;
  return execd;
}

absl::StatusOr<WarmSource::Forked> WarmSource::Fork(const SpawnSpec& contained, int stdout_fd,
                                                    int stderr_fd) {
  int go_pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go_pair) != 0) {
    return ErrnoStatus("socketpair", errno);
  }
  UniqueFd go_ours(go_pair[0]), go_rank(go_pair[1]);
  nlohmann::json request = {{"argv", contained.argv},
                            {"env", contained.env},
                            {"cwd", contained.cwd},
                            {"new_session", contained.new_session},
                            {"cpus", contained.cpus},
                            {"agent_pid", getpid()},
                            {"cgroup_namespace", contained.new_cgroup_namespace}};
  const int fds[3] = {stdout_fd >= 0 ? stdout_fd : STDOUT_FILENO,
                      stderr_fd >= 0 ? stderr_fd : STDERR_FILENO, go_rank.get()};
  absl::StatusOr<std::string> answer = Ask(request.dump(), fds);
  go_rank.reset();  // the rank holds its own: EOF for it if the agent dies before the byte
  if (!answer.ok()) {
    std::string why(answer.status().message());
    Retire(why);
    return absl::FailedPreconditionError(why);
  }
  if (absl::StartsWith(*answer, "fallback ")) {
    return absl::FailedPreconditionError(answer->substr(strlen("fallback ")));
  }
  pid_t pid = 0;
  if (!absl::StartsWith(*answer, "pid ") || !absl::SimpleAtoi(answer->substr(4), &pid) ||
      pid <= 0) {
    std::string why = absl::StrCat("the template answered '", *answer, "'");
    Retire(why);
    return absl::FailedPreconditionError(why);
  }
  // The middle process has exited before the answer: the rank is our child now, unreaped
  // (reaping happens on this thread), so the pid is still its own.
  Forked forked{
      .started = {.pid = pid, .pidfd = UniqueFd(PidfdOpen(pid)), .how = WorkerStart::kWarm},
      .go = std::move(go_ours)};
  if (!forked.started.pidfd.valid()) spdlog::warn("pidfd_open({}): {}", pid, strerror(errno));
  return forked;
}

absl::StatusOr<std::string> WarmSource::Ask(const std::string& request, const int fds[3]) {
  RETURN_IF_ERROR(SendWithFds(template_.socket.get(), request, fds, 3));
  ASSIGN_OR_RETURN(std::string answer, ReceiveAnswer(template_.socket.get(), options_.reply));
  answered_once_ = true;
  return answer;
}

std::string WarmSource::Ready() {
  CheckReady();
  if (template_.ready) return "";
  if (!template_.socket.valid()) return absl::StrCat("no template (", retired_why_, ")");
  // The first attempt's start waited for the first template (the agent's gate); an attempt
  // that found its predecessor gone is exec'd while the replacement imports.
  return replacements_ > 0 ? "the new template is still importing"
                           : "the template is still importing";
}

void WarmSource::CheckReady() {
  if (template_.ready || !template_.socket.valid()) return;
  absl::StatusOr<std::string> answer = ReceiveAnswer(template_.socket.get(), absl::ZeroDuration());
  if (absl::IsDeadlineExceeded(answer.status())) {
    if (absl::Now() < template_.deadline) return;  // still importing
    answer = absl::DeadlineExceededError(
        absl::StrCat("the warm template did not finish its imports within ",
                     absl::FormatDuration(options_.first_reply)));
  }
  if (answer.ok() && *answer == "ready") {
    template_.ready = true;
    return;
  }
  Retire(answer.ok() ? absl::StrCat("the template said '", *answer, "'")
                     : std::string(answer.status().message()));
}

absl::Status WarmSource::Contain(pid_t pid, int pidfd, const WorkerContainment& containment) {
  if (containment.cgroup_procs_fd >= 0) {
    std::string text = std::to_string(pid);
    if (write(containment.cgroup_procs_fd, text.data(), text.size()) < 0) {
      return ErrnoStatus(absl::StrCat("writing rank ", pid, " to the attempt's cgroup.procs"),
                         errno);
    }
  }
  if (containment.report_fd >= 0 && SendPidAndPidfd(containment.report_fd, '+', pid, pidfd) != 0) {
    return ErrnoStatus(absl::StrCat("reporting rank ", pid, " to the watchdog"), errno);
  }
  return absl::OkStatus();
}

void WarmSource::NoteFallback(const std::string& why) {
  if (fallback_logged_) {
    spdlog::debug("warm start: exec'd a worker instead: {}", why);
    return;
  }
  fallback_logged_ = true;
  spdlog::warn("warm start: exec'd a worker instead of forking it: {} (said once)", why);
}

}  // namespace muster
