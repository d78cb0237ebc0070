#include "rendezvous/shared_port/store_router.h"

#include <utility>

#include "base/status_macros.h"
#include "spdlog/spdlog.h"

namespace muster::shared_port {

absl::StatusOr<std::unique_ptr<c10d::StoreServer>> StoreRouter::StartStore(
    const std::shared_ptr<StoreRouter>& router, uint16_t port,
    std::shared_ptr<std::atomic<int64_t>> connection_gauge, const c10d::Limits& limits) {
  ASSIGN_OR_RETURN(std::unique_ptr<c10d::StoreServer> store,
                   c10d::StoreServer::Start({
                       .port = port,
                       .limits = limits,
                       .adopt_only = true,
                       .before_shutdown = [router](c10d::StoreServer* s) { router->Detach(s); },
                       .connection_gauge = std::move(connection_gauge),
                   }));
  router->Attach(store.get());
  return store;
}

void StoreRouter::Attach(c10d::StoreServer* store) {
  MutexLock lock(&mu_);
  current_ = store;
}

void StoreRouter::Detach(c10d::StoreServer* store) {
  MutexLock lock(&mu_);
  if (current_ == store) current_ = nullptr;
}

void StoreRouter::Route(UniqueFd socket, std::string peer) {
  // Held while handing over, so that a store that detaches afterwards gets nothing more.
  MutexLock lock(&mu_);
  if (current_ == nullptr) {
    spdlog::info("c10d store connection from {} between rounds: closed", peer);
    return;
  }
  current_->Adopt(std::move(socket), std::move(peer));
}

}  // namespace muster::shared_port
