#include "rendezvous/c10d/store_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "rendezvous/c10d/listener.h"
#include "rendezvous/c10d/store_loop.h"
#include "spdlog/spdlog.h"

namespace muster::c10d {

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(const Options& options) {
  BoundListener listener;
  if (options.adopt_only) {
    listener.port = options.port;
    listener.address = absl::StrCat("shared port ", options.port);
  } else {
    ASSIGN_OR_RETURN(listener, Listen(options.bind_address, options.port));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<StoreLoop> loop,
      StoreLoop::Create(std::move(listener.fd), options.limits, options.connection_gauge));
  std::unique_ptr<StoreServer> server(
      new StoreServer(std::move(loop), listener.port, listener.address, options.before_shutdown));
  StoreLoop* raw = server->loop_.get();
  server->thread_ = std::thread([raw] { raw->Run(); });
  if (options.adopt_only) {
    spdlog::info("c10d store serving the connections of {}", server->address_);
  } else {
    spdlog::info("c10d store listening on {} (backlog {})", server->address_, ListenBacklog());
  }
  return server;
}

StoreServer::StoreServer(std::unique_ptr<StoreLoop> loop, uint16_t port, std::string address,
                         std::function<void(StoreServer*)> before_shutdown)
    : loop_(std::move(loop)),
      port_(port),
      address_(std::move(address)),
      before_shutdown_(std::move(before_shutdown)) {}

StoreServer::~StoreServer() { Shutdown(); }

size_t StoreServer::num_connections() const { return loop_->num_connections(); }

void StoreServer::Adopt(UniqueFd socket, std::string peer) {
  loop_->Adopt(std::move(socket), std::move(peer));
}

void StoreServer::Detach() {
  std::call_once(detach_once_, [this] {
    if (before_shutdown_) before_shutdown_(this);
  });
}

void StoreServer::BeginShutdown() {
  Detach();
  loop_->Stop();
}

void StoreServer::Shutdown() {
  Detach();
  std::call_once(shutdown_once_, [this] {
    loop_->Stop();
    if (thread_.joinable()) thread_.join();
  });
}

}  // namespace muster::c10d
