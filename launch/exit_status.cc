#include "launch/exit_status.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <cctype>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace muster {

ExitStatus ExitStatus::FromWaitStatus(int wstatus) {
  ExitStatus s;
  if (WIFSIGNALED(wstatus)) {
    s.signal = WTERMSIG(wstatus);
  } else {
    s.exit_code = WEXITSTATUS(wstatus);
  }
  return s;
}

std::string ExitStatus::Describe() const {
  if (signal != 0) return absl::StrCat("signal ", signal, " (", SignalName(signal), ")");
  return absl::StrCat("exit ", exit_code);
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);  // glibc >= 2.32
  if (abbrev == nullptr) return absl::StrCat("SIG", sig);
  return absl::StrCat("SIG", abbrev);
}

absl::StatusOr<int> ParseSignal(std::string_view text) {
  std::string upper = absl::AsciiStrToUpper(absl::string_view(text.data(), text.size()));
  int number = 0;
  if (absl::SimpleAtoi(upper, &number)) {
    if (number > 0 && number < NSIG) return number;
  } else {
    std::string_view name = upper;
    if (name.substr(0, 3) == "SIG") name.remove_prefix(3);
    for (int sig = 1; sig < NSIG; ++sig) {
      const char* abbrev = sigabbrev_np(sig);
      if (abbrev != nullptr && name == abbrev) return sig;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", absl::string_view(text.data(), text.size()),
                   "' is not a signal; write e.g. SIGTERM, TERM or 15"));
}

}  // namespace muster
