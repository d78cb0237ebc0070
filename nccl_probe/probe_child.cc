#include "nccl_probe/probe_child.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/duration.h"
#include "launch/captured_run.h"

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

int ProbeChildMain(int fd, const ChildWork& work) {
  // Drivers may print; stdout belongs to the parent's table/JSON.
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  std::string payload = work([fd](const std::string& stage) { WriteAll(fd, "S " + stage + "\n"); });
  WriteAll(fd, "R " + payload + "\n");
  return 0;
}

std::string During(const std::string& stage) {
  return stage.empty() ? "" : absl::StrCat(" during ", stage);
}

}  // namespace

absl::StatusOr<std::string> RunInChild(const ChildWork& work, absl::Duration timeout) {
  absl::StatusOr<HelperChild> child =
      ForkHelper([&work](int out) { return ProbeChildMain(out, work); });
  if (!child.ok()) return child.status();
  const pid_t pid = child->pid;
  std::vector<HelperChild> one;
  one.push_back(std::move(*child));
  HelperResult r = std::move(AwaitHelpers(std::move(one), absl::Now() + timeout)[0]);
  // The last stage it named, and its report; a line cut by the deadline counts for nothing.
  std::string stage, payload;
  bool have_report = false;
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n');
  lines.pop_back();  // what follows the last '\n': empty, or a line not finished
  for (const std::string& line : lines) {
    if (line.rfind("S ", 0) == 0) stage = line.substr(2);
    if (line.rfind("R ", 0) == 0) {
      payload = line.substr(2);
      have_report = true;
    }
  }
  if (!r.error.ok()) return r.error;
  if (r.timed_out) {
    std::string stuck =
        r.reaped ? "" : absl::StrCat("; pid ", pid, " did not die (stuck in the kernel driver?)");
    return absl::DeadlineExceededError(absl::StrCat(
        "probe timed out after ", HumanDuration(timeout), During(stage), " and was killed", stuck));
  }
  if (!r.exit) return absl::InternalError(absl::StrCat("probe child was reaped elsewhere"));
  if (r.exit->signal != 0) {
    return absl::InternalError(absl::StrCat("probe child killed by signal ", r.exit->signal, " (",
                                            strsignal(r.exit->signal), ")", During(stage)));
  }
  if (!have_report) {
    return absl::InternalError(absl::StrCat("probe child exited with status ", r.exit->exit_code,
                                            " without a report", During(stage)));
  }
  return payload;
}

}  // namespace muster::probe
