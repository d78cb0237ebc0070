// Processes that outlived SIGKILL, as /proc shows them: launch/stuck_process.h.
#include "launch/stuck_process.h"

#include <fstream>
#include <iterator>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/proc_stat.h"

namespace muster {
namespace {

std::string ReadProcFile(pid_t pid, const char* name) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/", name));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

const char* StateName(char state) {
  switch (state) {
    case 'D':
      return "uninterruptible sleep";
    case 'Z':
      return "zombie";
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'T':
    case 't':
      return "stopped";
    case '?':
      return "gone";
    default:
      return "";
  }
}

}  // namespace

StuckProcess DescribeStuckProcess(pid_t pid) {
  StuckProcess p{.pid = pid};
  if (std::optional<ProcStat> stat = ReadProcStat(pid)) p.state = stat->state;
  p.wchan = std::string(absl::StripAsciiWhitespace(ReadProcFile(pid, "wchan")));
  if (p.wchan == "0") p.wchan.clear();  // running, or the kernel does not say
  return p;
}

std::string StuckProcessLine(const StuckProcess& p) {
  std::string who = p.rank >= 0 ? absl::StrCat("rank ", p.rank, " (local_rank ", p.local_rank,
                                               ", pid ", p.pid, ")")
                                : absl::StrCat("pid ", p.pid);
  std::string state = absl::StrCat("state ", std::string(1, p.state));
  if (*StateName(p.state) != '\0') absl::StrAppend(&state, " (", StateName(p.state), ")");
  return absl::StrCat(who, ": ", state, ", wchan ", p.wchan.empty() ? "unknown" : p.wchan);
}

std::string StuckProcessesLine(const std::vector<StuckProcess>& stuck) {
  std::vector<std::string> lines;
  lines.reserve(stuck.size());
  for (const StuckProcess& p : stuck) lines.push_back(StuckProcessLine(p));
  return absl::StrJoin(lines, "; ");
}

}  // namespace muster
