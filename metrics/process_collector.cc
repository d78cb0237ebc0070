#include "metrics/process_collector.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace muster::metrics {
namespace {

std::string ReadAll(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// /proc/stat's btime: the boot time in seconds since the epoch; 0 when unreadable.
double BootTime() {
  std::istringstream stat(ReadAll("/proc/stat"));
  std::string line;
  while (std::getline(stat, line)) {
    double t = 0;
    if (line.rfind("btime ", 0) == 0 && absl::SimpleAtod(line.substr(6), &t)) return t;
  }
  return 0;
}

// Entries of /proc/self/fd, less the one opendir holds; -1 when it cannot be read.
int OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;
}

prometheus::MetricFamily OneValueFamily(const char* name, const char* help,
                                        prometheus::MetricType type, double value) {
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return prometheus::MetricFamily{.name = name, .help = help, .type = type, .metric = {m}};
}

}  // namespace

std::optional<ProcStat> ParseProcStat(const std::string& text, long ticks_per_second,
                                      long page_size) {
  size_t close = text.rfind(')');
  if (close == std::string::npos || ticks_per_second <= 0) return std::nullopt;
  // After ")": field 3 (state) is fields[0]; utime is field 14, stime 15, starttime 22,
  // vsize 23, rss 24 (proc(5)).
  std::vector<std::string> fields =
      absl::StrSplit(text.substr(close + 1), ' ', absl::SkipWhitespace());
  auto field = [&](int n, double* out) {
    size_t i = static_cast<size_t>(n - 3);
    return i < fields.size() && absl::SimpleAtod(fields[i], out);
  };
  double utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
  if (!field(14, &utime) || !field(15, &stime) || !field(22, &start) || !field(23, &vsize) ||
      !field(24, &rss)) {
    return std::nullopt;
  }
  const double hz = static_cast<double>(ticks_per_second);
  return ProcStat{.cpu_seconds = (utime + stime) / hz,
                  .start_seconds = start / hz,
                  .virtual_bytes = vsize,
                  .resident_bytes = rss * static_cast<double>(page_size)};
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  std::optional<ProcStat> stat =
      ParseProcStat(ReadAll("/proc/self/stat"), sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE));
  if (stat) {
    out.push_back(OneValueFamily("process_cpu_seconds_total",
                                 "User and system CPU time spent in seconds.", MetricType::Counter,
                                 stat->cpu_seconds));
    out.push_back(OneValueFamily("process_resident_memory_bytes", "Resident memory size in bytes.",
                                 MetricType::Gauge, stat->resident_bytes));
    out.push_back(OneValueFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                                 MetricType::Gauge, stat->virtual_bytes));
    if (double boot = BootTime(); boot > 0) {
      out.push_back(OneValueFamily("process_start_time_seconds",
                                   "Start time of the process since unix epoch in seconds.",
                                   MetricType::Gauge, boot + stat->start_seconds));
    }
  }
  if (int fds = OpenFds(); fds >= 0) {
    out.push_back(OneValueFamily("process_open_fds", "Number of open file descriptors.",
                                 MetricType::Gauge, fds));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    out.push_back(OneValueFamily("process_max_fds", "Maximum number of open file descriptors.",
                                 MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return out;
}

}  // namespace muster::metrics
