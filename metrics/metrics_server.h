// MetricsServer: Prometheus text exposition over HTTP (GET /metrics) on its own port
// (--metrics-port of `muster run` and `muster serve`): one registry and the collectables
// added, rendered by prometheus-cpp's TextSerializer at each scrape and served by a
// ScrapeServer (scrape_server.h: one reactor thread, bounded connections). The process collector
// (process_collector.h) is always registered; AgentMetrics and ServerMetrics add their families to
// registry(). Nothing is computed until a scrape asks, except what the agent counts as it happens.
//
// Owned by the wiring; destroying it stops serving. Thread-safe (prometheus-cpp's types
// are): scrapes run on the server's thread, updates come from the agent's loop thread.
#ifndef MUSTER_METRICS_METRICS_SERVER_H_
#define MUSTER_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "metrics/scrape_server.h"

namespace prometheus {
class Collectable;
class Registry;
}  // namespace prometheus

namespace muster::metrics {

class MetricsServer {
 public:
  // `listen_address` like "[::]:9400" (dual-stack), "127.0.0.1:9400" or "[fd00::1]:0"
  // (0: any free port, see port()). Unavailable when it cannot be bound, the message
  // naming `flag`.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen_address, const std::string& flag,
      ScrapeServer::Options options = ScrapeServer::Options());
  ~MetricsServer();

  int port() const { return port_; }
  // Where families are added; shared so that what registers into it can keep it alive.
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  // Serves `collectable` too, computed at each scrape (kept alive by the server).
  void Add(std::shared_ptr<prometheus::Collectable> collectable);

 private:
  explicit MetricsServer(std::shared_ptr<prometheus::Registry> registry);
  // The text exposition of every collectable (on the scrape server's thread).
  std::string Render();

  std::shared_ptr<prometheus::Registry> registry_;
  Mutex mu_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_ ABSL_GUARDED_BY(mu_);
  int port_ = 0;
  std::unique_ptr<ScrapeServer> scrapes_;  // last: stopped first
};

}  // namespace muster::metrics

#endif  // MUSTER_METRICS_METRICS_SERVER_H_
