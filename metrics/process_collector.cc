#include "metrics/process_collector.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "base/proc_stat.h"

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

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  if (std::optional<ProcStat> stat = ReadProcStat(0)) {
    const double hz = static_cast<double>(ClockTicksPerSecond());
    out.push_back(OneValueFamily("process_cpu_seconds_total",
                                 "User and system CPU time spent in seconds.", MetricType::Counter,
                                 static_cast<double>(stat->utime + stat->stime) / hz));
    out.push_back(OneValueFamily(
        "process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
        static_cast<double>(stat->rss_pages) * static_cast<double>(sysconf(_SC_PAGESIZE))));
    out.push_back(OneValueFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                                 MetricType::Gauge, static_cast<double>(stat->vsize)));
    if (double boot = BootTime(); boot > 0) {
      out.push_back(OneValueFamily(
          "process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
          MetricType::Gauge, boot + static_cast<double>(stat->starttime) / hz));
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
