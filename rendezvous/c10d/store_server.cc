#include "rendezvous/c10d/store_server.h"

#include <utility>

#include "base/status_macros.h"
#include "rendezvous/c10d/listener.h"
#include "rendezvous/c10d/store_loop.h"
#include "spdlog/spdlog.h"

namespace muster::c10d {

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(const Options& options) {
  ASSIGN_OR_RETURN(BoundListener listener, Listen(options.bind_address, options.port));
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLoop> loop,
                   StoreLoop::Create(std::move(listener.fd), options.limits));
  std::unique_ptr<StoreServer> server(
      new StoreServer(std::move(loop), listener.port, listener.address));
  StoreLoop* raw = server->loop_.get();
  server->thread_ = std::thread([raw] { raw->Run(); });
  spdlog::info("c10d store listening on {} (backlog {})", server->address_, ListenBacklog());
  return server;
}

StoreServer::StoreServer(std::unique_ptr<StoreLoop> loop, uint16_t port, std::string address)
    : loop_(std::move(loop)), port_(port), address_(std::move(address)) {}

StoreServer::~StoreServer() { Shutdown(); }

size_t StoreServer::num_connections() const { return loop_->num_connections(); }

void StoreServer::BeginShutdown() { loop_->Stop(); }

void StoreServer::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    loop_->Stop();
    if (thread_.joinable()) thread_.join();
  });
}

}  // namespace muster::c10d
