#include "launch/signals.h"

#include <signal.h>
#include <sys/signalfd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/errno_status.h"
#include "launch/exit_status.h"

namespace muster {

absl::StatusOr<std::vector<int>> ParseSignalList(std::string_view text) {
  std::vector<int> signals;
  absl::string_view t = absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (t.empty()) return signals;  // handle none: the agent then dies of them as any process
  for (absl::string_view part : absl::StrSplit(t, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", t, "' has an empty entry; list e.g. SIGTERM,SIGINT"));
    }
    absl::StatusOr<int> sig = ParseSignal(std::string_view(part.data(), part.size()));
    if (!sig.ok()) return sig.status();
    if (*sig == SIGKILL || *sig == SIGSTOP || *sig == SIGCHLD) {
      return absl::InvalidArgumentError(
          absl::StrCat(part, " cannot be handled; list e.g. SIGTERM,SIGINT"));
    }
    signals.push_back(*sig);
  }
  return signals;
}

absl::StatusOr<UniqueFd> BlockAndOpenSignalFd(const std::vector<int>& handled) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (int sig : handled) sigaddset(&set, sig);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return ErrnoStatus("sigprocmask", errno);
  if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) return ErrnoStatus("signal(SIGPIPE)", errno);
  int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus("signalfd", errno);
  return UniqueFd(fd);
}

}  // namespace muster
