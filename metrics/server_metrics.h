// ServerMetrics: what a rendezvous server reports on --metrics-port (the serving agent's
// or `muster serve`'s), under the muster_server_ prefix, with bounded labels:
//   muster_server_jobs{phase}                      jobs by phase (Pending ... Failed)
//   muster_server_nodes{state}                     nodes by state (Waiting ... Left)
//   muster_server_joins_total                      nodes admitted into a job
//   muster_server_round_duration_seconds           a round's forming: job created, previous
//                                                  round stopped or gathering again -> start
// Joins and rounds are counted as they happen (a RegistryObserver, called under the
// registry's mutex: atomics and the histogram's short lock only); jobs and nodes are
// counted at each scrape from the server (SetCounts). Thread-safe.
#ifndef MUSTER_METRICS_SERVER_METRICS_H_
#define MUSTER_METRICS_SERVER_METRICS_H_

#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "metrics/metrics_server.h"
#include "rendezvous/registry/job_registry.h"

namespace prometheus {
class Counter;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace muster::metrics {

class ServerMetrics : public rdzv::RegistryObserver {
 public:
  // Registers the server's families in `server`'s registry.
  static std::shared_ptr<ServerMetrics> Create(MetricsServer* server);
  // Takes the families out of the registry again (a server that could not start).
  ~ServerMetrics() override;

  // Where a scrape reads the jobs and nodes (RendezvousServer::Counts); null before the
  // server runs and once it is gone (set it to null before destroying the server).
  void SetCounts(std::function<rdzv::RegistryCounts()> counts);

  void OnJoin() override;
  void OnRoundStarted(absl::Duration formed_in) override;

 private:
  class Counted;
  explicit ServerMetrics(MetricsServer* server);
  rdzv::RegistryCounts Counts() const;

  std::shared_ptr<prometheus::Registry> registry_;  // keeps the families below alive
  prometheus::Family<prometheus::Counter>* joins_family_;
  prometheus::Family<prometheus::Histogram>* round_family_;
  prometheus::Counter* joins_;
  prometheus::Histogram* round_seconds_;
  mutable Mutex mu_;
  std::function<rdzv::RegistryCounts()> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace muster::metrics

#endif  // MUSTER_METRICS_SERVER_METRICS_H_
