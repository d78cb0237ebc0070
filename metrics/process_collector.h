// ProcessCollector: the process's own CPU, memory and file descriptors, read from
// /proc/self at each scrape, under the names every Prometheus client library uses
// (process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_start_time_seconds), so existing dashboards
// work. Costs nothing between scrapes. Thread-safe (no state).
#ifndef MUSTER_METRICS_PROCESS_COLLECTOR_H_
#define MUSTER_METRICS_PROCESS_COLLECTOR_H_

#include <optional>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace muster::metrics {

// The fields of /proc/PID/stat the collector reports.
struct ProcStat {
  double cpu_seconds = 0;     // utime + stime
  double start_seconds = 0;   // since boot
  double virtual_bytes = 0;   // vsize
  double resident_bytes = 0;  // rss pages x page size
};

// Parses /proc/PID/stat's text (the command name may hold spaces and parentheses: the
// fields follow the last ')'). nullopt when it is not that format.
std::optional<ProcStat> ParseProcStat(const std::string& text, long ticks_per_second,
                                      long page_size);

class ProcessCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace muster::metrics

#endif  // MUSTER_METRICS_PROCESS_COLLECTOR_H_
