// StoreRouter: where the shared port sends store connections — to the current round's
// store (docs/design.md §4.2: every round a fresh store, so a failed attempt's keys and
// connections end with it). Between rounds there is none and such connections are
// closed. Shared by the SharedPort's thread and the agent's; thread-safe.
#ifndef MUSTER_RENDEZVOUS_SHARED_PORT_STORE_ROUTER_H_
#define MUSTER_RENDEZVOUS_SHARED_PORT_STORE_ROUTER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "base/unique_fd.h"
#include "rendezvous/c10d/store_server.h"

namespace muster::shared_port {

class StoreRouter {
 public:
  // A fresh store fed by `router` (kept alive by it): it reports `port` (the shared one)
  // and detaches itself from the router before it stops. `limits`, `connection_gauge`: see
  // c10d::StoreServer::Options.
  static absl::StatusOr<std::unique_ptr<c10d::StoreServer>> StartStore(
      const std::shared_ptr<StoreRouter>& router, uint16_t port,
      std::shared_ptr<std::atomic<int64_t>> connection_gauge = nullptr,
      const c10d::Limits& limits = c10d::Limits());

  // SharedPort::Options::on_store.
  void Route(UniqueFd socket, std::string peer);

 private:
  void Attach(c10d::StoreServer* store);
  void Detach(c10d::StoreServer* store);

  Mutex mu_;
  c10d::StoreServer* current_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace muster::shared_port

#endif  // MUSTER_RENDEZVOUS_SHARED_PORT_STORE_ROUTER_H_
