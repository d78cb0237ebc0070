#include "agent/diagnostics/process_cpu.h"

#include <dirent.h>

#include <optional>

#include "absl/strings/numbers.h"

namespace muster {

absl::Duration TreeCpuOf(const ProcStat& st) {
  return absl::Seconds(st.utime + st.stime + st.cutime + st.cstime) / ClockTicksPerSecond();
}

std::map<pid_t, absl::Duration> ProcessTreeCpu(const std::vector<pid_t>& roots) {
  std::map<pid_t, ProcStat> all;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {};
  while (dirent* e = readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0) continue;
    // nullopt: it ended since the directory was read
    if (std::optional<ProcStat> st = ReadProcStat(pid)) all[pid] = *st;
  }
  closedir(proc);
  std::map<pid_t, absl::Duration> out;
  for (pid_t root : roots) {
    if (all.count(root)) out[root] = absl::ZeroDuration();
  }
  // Each process adds its time to the root above it (a worker's tree is small; a chain
  // longer than the process table is a loop from pid reuse and is cut).
  for (const auto& [pid, st] : all) {
    pid_t at = pid;
    for (size_t hops = 0; hops <= all.size() && at > 1; ++hops) {
      if (auto r = out.find(at); r != out.end()) {
        r->second += TreeCpuOf(st);
        break;
      }
      auto up = all.find(at);
      if (up == all.end()) break;
      at = up->second.ppid;
    }
  }
  return out;
}

}  // namespace muster
