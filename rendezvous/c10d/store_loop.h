// The store's side of its reactor (base/event_loop.h): accepts clients through
// base/acceptor.h (or adopts sockets another listener accepted), reads and decodes
// their requests, applies them to the StoreState and writes replies, all on the
// thread that calls Run(). Owned by StoreServer. Only Stop(), Adopt() and
// num_connections() may be called from other threads; everything else belongs to
// the loop thread.
#ifndef MUSTER_RENDEZVOUS_C10D_STORE_LOOP_H_
#define MUSTER_RENDEZVOUS_C10D_STORE_LOOP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/acceptor.h"
#include "base/event_loop.h"
#include "base/unique_fd.h"
#include "rendezvous/c10d/connection.h"
#include "rendezvous/c10d/store_state.h"
#include "rendezvous/c10d/wire.h"

namespace muster::c10d {

class StoreLoop : public Outbox {
 public:
  // Takes a listening, non-blocking socket, or none (an invalid fd): then
  // connections only arrive through Adopt().
  // `connection_gauge`, when given, follows num_connections() (shared by every round's
  // store: the agent's metrics read it from another thread).
  static absl::StatusOr<std::unique_ptr<StoreLoop>> Create(
      UniqueFd listener, const Limits& limits,
      std::shared_ptr<std::atomic<int64_t>> connection_gauge = nullptr);
  ~StoreLoop() override = default;

  // Serves until Stop(); closes every client connection before returning.
  void Run();
  // Thread-safe, async-signal-safe: EventLoop::Quit.
  void Stop();
  size_t num_connections() const { return num_connections_.load(); }
  // Thread-safe: serves a connected, non-blocking socket as if the loop had
  // accepted it. Sockets adopted after Stop() are closed unserved.
  void Adopt(UniqueFd socket, std::string peer);

  // Outbox: queues a reply for a connection (ignored if it is gone); one that
  // would pass the output limit is refused and the connection closed.
  void Send(ConnectionId conn, std::span<const std::string_view> parts) override;

 private:
  StoreLoop(std::unique_ptr<EventLoop> loop, const Limits& limits,
            std::shared_ptr<std::atomic<int64_t>> connection_gauge);

  void AddConnection(UniqueFd socket, std::string peer);
  void OnConnectionEvent(Connection& conn, uint32_t events);
  // Decodes and executes buffered requests, then writes; repeats while draining
  // the output un-pauses input that is already buffered. False when `conn` was
  // closed.
  bool Service(Connection& conn);
  void FlushDirty();
  void UpdateInterest(Connection& conn);
  // `warn`: the peer misbehaved (logged with its address); otherwise a normal
  // close.
  void Close(Connection& conn, std::string_view reason, bool warn);

  const std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Acceptor> acceptor_;  // none when every connection is adopted
  Limits limits_;
  StoreState state_{this, limits_.max_store_bytes};
  absl::flat_hash_map<ConnectionId, std::unique_ptr<Connection>> connections_;
  std::vector<ConnectionId> dirty_;  // connections with output queued this iteration
  ConnectionId next_id_ = 1;
  std::atomic<size_t> num_connections_{0};
  const std::shared_ptr<std::atomic<int64_t>> connection_gauge_;  // may be null
};

}  // namespace muster::c10d

#endif  // MUSTER_RENDEZVOUS_C10D_STORE_LOOP_H_
