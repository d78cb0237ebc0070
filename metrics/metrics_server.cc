#include "metrics/metrics_server.h"

#include <utility>

#include "metrics/process_collector.h"
#include "prometheus/collectable.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "spdlog/spdlog.h"

namespace muster::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen_address, const std::string& flag, ScrapeServer::Options options) {
  std::unique_ptr<MetricsServer> server(
      new MetricsServer(std::make_shared<prometheus::Registry>()));
  server->Add(server->registry_);
  server->Add(std::make_shared<ProcessCollector>());
  MetricsServer* self = server.get();
  absl::StatusOr<std::unique_ptr<ScrapeServer>> scrapes = ScrapeServer::Start(
      listen_address, flag, [self] { return self->Render(); }, options);
  if (!scrapes.ok()) return scrapes.status();
  server->scrapes_ = *std::move(scrapes);
  server->port_ = server->scrapes_->port();
  spdlog::info("metrics: Prometheus /metrics on {} (port {})", listen_address, server->port_);
  return server;
}

MetricsServer::MetricsServer(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)) {}

MetricsServer::~MetricsServer() = default;

void MetricsServer::Add(std::shared_ptr<prometheus::Collectable> collectable) {
  MutexLock lock(&mu_);
  collectables_.push_back(std::move(collectable));
}

std::string MetricsServer::Render() {
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables;
  {
    MutexLock lock(&mu_);
    collectables = collectables_;
  }
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : collectables) {
    std::vector<prometheus::MetricFamily> more = c->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace muster::metrics
