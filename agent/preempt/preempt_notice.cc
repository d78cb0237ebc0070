#include "agent/preempt/preempt_notice.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/lifecycle/status_file.h"
#include "base/unique_fd.h"
#include "launch/exit_status.h"
#include "launch/pidfd.h"
#include "spdlog/spdlog.h"

namespace muster {

std::string PreemptedFile(const std::string& worker_dir) { return worker_dir + "/preempted"; }

void AddPreemptEnv(const std::string& worker_dir, std::vector<std::string>* env) {
  constexpr std::string_view kPrefix = "MUSTER_PREEMPTED=";
  std::string entry = std::string(kPrefix) + PreemptedFile(worker_dir);
  auto at = std::lower_bound(env->begin(), env->end(), kPrefix);
  if (at != env->end() && at->starts_with(kPrefix)) {
    *at = std::move(entry);
  } else {
    env->insert(at, std::move(entry));
  }
}

bool CatchesSignal(pid_t pid, int sig) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (!line.starts_with("SigCgt:")) continue;
    uint64_t mask = 0;
    std::string hex(absl::StripAsciiWhitespace(line.substr(7)));
    if (!absl::SimpleHexAtoi(hex, &mask)) return false;
    return sig >= 1 && sig <= 64 && (mask >> (sig - 1)) & 1;
  }
  return false;  // gone (ENOENT) or no such line: nothing to signal
}

NoticeDelivery DeliverPreemptNotice(const std::vector<WorkerView>& workers, int sig,
                                    const std::string& reason) {
  NoticeDelivery d;
  for (const WorkerView& w : workers) {
    if (w.status || w.pid <= 0) continue;
    ++d.running;
    // The file first: a worker woken by the signal finds the reason already there.
    absl::Status written = WriteFileAtomically(PreemptedFile(w.dir), reason + "\n");
    if (!written.ok()) {
      spdlog::warn("rank {}: cannot write the preemption notice: {}", w.placement.rank,
                   std::string(written.message()));
    }
    if (sig == 0) {
      ++d.listening;
      continue;
    }
    if (!CatchesSignal(w.pid, sig)) continue;  // its default action would kill it
    UniqueFd pidfd(PidfdOpen(w.pid));
    if (!pidfd.valid() || PidfdSignal(pidfd.get(), sig) != 0) {
      // ESRCH: it ended meanwhile, and its exit follows through the launcher.
      spdlog::warn("rank {} (pid {}): cannot send {}: {}", w.placement.rank, w.pid, SignalName(sig),
                   strerror(errno));
      continue;
    }
    ++d.signalled;
    ++d.listening;
  }
  return d;
}

bool AllWorkersEnded(const std::vector<WorkerView>& workers) {
  return std::all_of(workers.begin(), workers.end(),
                     [](const WorkerView& w) { return w.status || w.pid <= 0; });
}

}  // namespace muster
