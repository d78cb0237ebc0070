#include "base/proc_stat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"

namespace muster {
namespace {

bool ParseField(std::string_view text, int64_t* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos || close + 2 >= text.size()) return std::nullopt;
  // f[0] is field 3 (state), so field n is f[n - 3].
  std::vector<std::string_view> f;
  for (std::string_view rest = text.substr(close + 2); !rest.empty();) {
    const size_t space = rest.find_first_of(" \n");
    if (space != 0) f.push_back(rest.substr(0, space));
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  }
  if (f.size() < 22 || f[0].size() != 1) return std::nullopt;
  ProcStat st;
  st.state = f[0][0];
  int64_t ppid = 0;
  if (!ParseField(f[1], &ppid) || !ParseField(f[11], &st.utime) || !ParseField(f[12], &st.stime) ||
      !ParseField(f[13], &st.cutime) || !ParseField(f[14], &st.cstime) ||
      !ParseField(f[19], &st.starttime) || !ParseField(f[20], &st.vsize) ||
      !ParseField(f[21], &st.rss_pages)) {
    return std::nullopt;
  }
  st.ppid = static_cast<pid_t>(ppid);
  return st;
}

std::string ReadProcStatText(pid_t pid) {
  const std::string path = pid == 0 ? "/proc/self/stat" : absl::StrCat("/proc/", pid, "/stat");
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return "";  // ENOENT/ESRCH: the process is gone
  // One read: the kernel makes the whole line at once (well under 1 KiB; 4 KiB leaves room
  // for a 64-bit field set with a long command name).
  char buf[4096];
  ssize_t n;
  do {
    n = read(fd.get(), buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

std::optional<ProcStat> ReadProcStat(pid_t pid) { return ParseProcStat(ReadProcStatText(pid)); }

int64_t ClockTicksPerSecond() {
  static const int64_t hz = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
  return hz;
}

}  // namespace muster
