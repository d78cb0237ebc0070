#include "agent/diagnostics/process_cpu.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"

namespace muster {
namespace {

// The contents of /proc/<pid>/stat ("" when the process is gone).
std::string ReadStat(const char* pid) {
  UniqueFd fd(open(absl::StrCat("/proc/", pid, "/stat").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return "";  // ENOENT/ESRCH: it ended since the directory was read
  char buf[1024];
  ssize_t n;
  do {
    n = read(fd.get(), buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

bool ParseProcStat(std::string_view line, ProcStat* out) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; it ends at the last ')'.
  size_t close = line.rfind(')');
  if (close == std::string_view::npos || close + 2 >= line.size()) return false;
  std::vector<std::string_view> f;
  for (std::string_view rest = line.substr(close + 2); !rest.empty();) {
    size_t space = rest.find_first_of(" \n");
    f.push_back(rest.substr(0, space));
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  }
  // f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
  if (f.size() < 15) return false;
  auto number = [](std::string_view text, int64_t* v) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *v);
    return ec == std::errc() && end == text.data() + text.size();
  };
  int64_t ppid = 0, ticks[4] = {};
  if (!number(f[1], &ppid)) return false;
  for (int i = 0; i < 4; ++i) {
    if (!number(f[11 + i], &ticks[i])) return false;
  }
  static const int64_t kHz = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
  out->ppid = static_cast<pid_t>(ppid);
  out->cpu = absl::Seconds(ticks[0] + ticks[1] + ticks[2] + ticks[3]) / kHz;
  return true;
}

std::map<pid_t, absl::Duration> ProcessTreeCpu(const std::vector<pid_t>& roots) {
  std::map<pid_t, ProcStat> all;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {};
  while (dirent* e = readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0) continue;
    ProcStat st;
    if (ParseProcStat(ReadStat(e->d_name), &st)) all[pid] = st;
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
        r->second += st.cpu;
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
