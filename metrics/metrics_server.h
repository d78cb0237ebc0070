// MetricsServer: Prometheus text exposition over HTTP (GET /metrics) on its own port
// (--metrics-port of `muster run` and `muster serve`), with prometheus-cpp's Exposer
// (civetweb threads) and one registry. The process collector (process_collector.h) is
// always registered; AgentMetrics and ServerMetrics add their families to registry().
// Nothing is computed until a scrape asks, except what the agent counts as it happens.
//
// Owned by the wiring; destroying it stops serving. Thread-safe (prometheus-cpp's types
// are): scrapes run on civetweb's threads, updates come from the agent's loop thread.
#ifndef MUSTER_METRICS_METRICS_SERVER_H_
#define MUSTER_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prometheus {
class Collectable;
class Exposer;
class Registry;
}  // namespace prometheus

namespace muster::metrics {

class MetricsServer {
 public:
  // `listen_address` like "[::]:9400" (dual-stack), "127.0.0.1:9400" or "[fd00::1]:0"
  // (0: any free port, see port()). Unavailable when it cannot be bound, the message
  // naming `flag`.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen_address,
                                                              const std::string& flag);
  ~MetricsServer();

  int port() const { return port_; }
  // Where families are added; shared so that what registers into it can keep it alive.
  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }
  // Serves `collectable` too, computed at each scrape (kept alive by the server).
  void Add(std::shared_ptr<prometheus::Collectable> collectable);

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                std::shared_ptr<prometheus::Registry> registry, int port, std::string wake_host);

  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;
  int port_;
  std::string wake_host_;  // where a connection reaches the listener (see the destructor)
};

// The numeric address a local connection to `listen_address` goes to: its host, or
// 127.0.0.1 for a wildcard ("[::]", "0.0.0.0").
std::string LocalHostOf(const std::string& listen_address);

// civetweb's spelling of a listen address: "[::]:N" (gRPC's dual-stack wildcard) is "+N"
// (civetweb binds "[::]" IPv6-only); others are passed as they are.
std::string CivetListeningPort(const std::string& listen_address);

}  // namespace muster::metrics

#endif  // MUSTER_METRICS_METRICS_SERVER_H_
