#include "metrics/server_metrics.h"

#include <array>

#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace muster::metrics {
namespace {

// Every known label value is listed (0 when none), so that a query sees a series drop to
// zero instead of vanishing.
template <typename Value, size_t N>
prometheus::MetricFamily Breakdown(const char* name, const char* help, const char* label,
                                   const std::array<Value, N>& values,
                                   const char* (*value_name)(Value),
                                   const std::map<Value, int>& counts) {
  prometheus::MetricFamily f{.name = name, .help = help, .type = prometheus::MetricType::Gauge};
  for (Value v : values) {
    prometheus::ClientMetric m;
    m.label.push_back({label, value_name(v)});
    auto it = counts.find(v);
    m.gauge.value = it == counts.end() ? 0 : it->second;
    f.metric.push_back(std::move(m));
  }
  return f;
}

}  // namespace

// Jobs and nodes, counted at a scrape.
class ServerMetrics::Counted : public prometheus::Collectable {
 public:
  explicit Counted(std::weak_ptr<const ServerMetrics> owner) : owner_(std::move(owner)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::shared_ptr<const ServerMetrics> owner = owner_.lock();
    if (!owner) return {};
    rdzv::RegistryCounts c = owner->Counts();
    return {Breakdown("muster_server_jobs", "Jobs on this rendezvous server, by phase.", "phase",
                      rdzv::kJobPhases, rdzv::JobPhaseName, c.jobs_by_phase),
            Breakdown("muster_server_nodes", "Nodes of this server's jobs, by state.", "state",
                      rdzv::kNodeStates, rdzv::NodeStateName, c.nodes_by_state)};
  }

 private:
  std::weak_ptr<const ServerMetrics> owner_;
};

std::shared_ptr<ServerMetrics> ServerMetrics::Create(MetricsServer* server) {
  std::shared_ptr<ServerMetrics> m(new ServerMetrics(server));
  server->Add(std::make_shared<Counted>(m));
  return m;
}

ServerMetrics::ServerMetrics(MetricsServer* server) : registry_(server->registry()) {
  joins_family_ = &prometheus::BuildCounter()
                       .Name("muster_server_joins_total")
                       .Help("Nodes admitted into a job by this rendezvous server.")
                       .Register(*registry_);
  joins_ = &joins_family_->Add({});
  round_family_ = &prometheus::BuildHistogram()
                       .Name("muster_server_round_duration_seconds")
                       .Help(
                           "How long a round took to form: from the job's creation, the "
                           "previous round's stop or a new gathering, to its start.")
                       .Register(*registry_);
  round_seconds_ = &round_family_->Add(
      {}, prometheus::Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                                                  120, 300, 600});
}

ServerMetrics::~ServerMetrics() {
  registry_->Remove(*joins_family_);
  registry_->Remove(*round_family_);
}

void ServerMetrics::SetCounts(std::function<rdzv::RegistryCounts()> counts) {
  MutexLock lock(&mu_);
  counts_ = std::move(counts);
}

rdzv::RegistryCounts ServerMetrics::Counts() const {
  // Held during the call, so that SetCounts(nullptr) waits out a scrape in progress.
  MutexLock lock(&mu_);
  return counts_ ? counts_() : rdzv::RegistryCounts{};
}

void ServerMetrics::OnJoin() { joins_->Increment(); }

void ServerMetrics::OnRoundStarted(absl::Duration formed_in) {
  round_seconds_->Observe(absl::ToDoubleSeconds(formed_in));
}

}  // namespace muster::metrics
