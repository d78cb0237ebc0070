// ProcessCollector: the process's own CPU, memory and file descriptors, read from
// /proc/self at each scrape, under the names every Prometheus client library uses
// (process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_start_time_seconds), so existing dashboards
// work. Costs nothing between scrapes. Thread-safe (no state).
#ifndef MUSTER_METRICS_PROCESS_COLLECTOR_H_
#define MUSTER_METRICS_PROCESS_COLLECTOR_H_

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace muster::metrics {

class ProcessCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace muster::metrics

#endif  // MUSTER_METRICS_PROCESS_COLLECTOR_H_
