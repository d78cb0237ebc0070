#include "rendezvous/c10d/store_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <string>
#include <utility>

#include "base/status_macros.h"
#include "rendezvous/c10d/listener.h"
#include "spdlog/spdlog.h"

namespace muster::c10d {

absl::StatusOr<std::unique_ptr<StoreLoop>> StoreLoop::Create(
    UniqueFd listener, const Limits& limits,
    std::shared_ptr<std::atomic<int64_t>> connection_gauge) {
  ASSIGN_OR_RETURN(std::unique_ptr<EventLoop> loop, EventLoop::Create());
  std::unique_ptr<StoreLoop> store(
      new StoreLoop(std::move(loop), limits, std::move(connection_gauge)));
  if (listener.valid()) {
    StoreLoop* self = store.get();
    ASSIGN_OR_RETURN(
        store->acceptor_,
        Acceptor::Start(store->loop_.get(), std::move(listener), {.what = "c10d store"},
                        [self](UniqueFd socket, const sockaddr_storage& peer) {
                          self->AddConnection(std::move(socket), FormatPeer(&peer));
                        }));
  }
  return store;
}

StoreLoop::StoreLoop(std::unique_ptr<EventLoop> loop, const Limits& limits,
                     std::shared_ptr<std::atomic<int64_t>> connection_gauge)
    : loop_(std::move(loop)), limits_(limits), connection_gauge_(std::move(connection_gauge)) {}

void StoreLoop::Stop() { loop_->Quit(); }

void StoreLoop::Run() {
  // Replies queued by one wake-up (to waiters on other connections too) go out together.
  absl::Status ran = loop_->Run([this] { FlushDirty(); });
  if (!ran.ok()) spdlog::error("c10d store: {}; stopping", ran.ToString());
  if (connection_gauge_) *connection_gauge_ -= static_cast<int64_t>(num_connections_.load());
  for (const auto& [id, conn] : connections_) loop_->Remove(conn->fd());
  connections_.clear();
  num_connections_ = 0;
}

void StoreLoop::Adopt(UniqueFd socket, std::string peer) {
  // A socket posted after Stop() is closed with the loop's queue, unserved.
  loop_->Post([this, socket = std::make_shared<UniqueFd>(std::move(socket)),
               peer = std::move(peer)]() mutable {
    if (!loop_->quitting()) AddConnection(std::move(*socket), std::move(peer));
  });
}

void StoreLoop::AddConnection(UniqueFd socket, std::string peer) {
  int one = 1;
  (void)::setsockopt(socket.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ConnectionId id = next_id_++;
  auto conn = std::make_unique<Connection>(id, std::move(socket), std::move(peer), limits_);
  // The watch ends (Close) before the connection does: the pointer never dangles.
  absl::Status s = loop_->Add(conn->fd(), EPOLLIN, [this, c = conn.get()](uint32_t events) {
    OnConnectionEvent(*c, events);
  });
  if (!s.ok()) {
    spdlog::warn("c10d store: dropping connection from {}: {}", conn->peer(),
                 std::string(s.message()));
    return;
  }
  conn->registered_events = EPOLLIN;
  spdlog::debug("c10d store: connection from {}", conn->peer());
  connections_.emplace(id, std::move(conn));
  ++num_connections_;
  if (connection_gauge_) ++*connection_gauge_;
  // Bytes that arrived before the socket was ours are already waiting: epoll reports
  // them (level-triggered) on the next wait.
}

void StoreLoop::OnConnectionEvent(Connection& conn, uint32_t events) {
  if (events & EPOLLOUT) {
    absl::Status s = conn.Flush();
    if (!s.ok()) return Close(conn, std::string(s.message()), false);
  }
  bool peer_open = true;
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    absl::StatusOr<bool> open = conn.Read();
    if (!open.ok()) return Close(conn, std::string(open.status().message()), false);
    peer_open = *open;
  }
  if (!Service(conn)) return;
  if (!peer_open) {
    // Requests that arrived before the FIN were served; best-effort write, then
    // close.
    (void)conn.Flush();
    return Close(conn, "peer closed the connection", false);
  }
  UpdateInterest(conn);
}

bool StoreLoop::Service(Connection& conn) {
  while (true) {
    absl::Status s =
        conn.ProcessInput([this, &conn](Request& r) { return state_.Execute(conn.id(), r); });
    if (!s.ok()) {
      Close(conn, std::string(s.message()), true);
      return false;
    }
    if (conn.overflowed()) {
      Close(conn, conn.OverflowReason(), true);
      return false;
    }
    bool was_paused = conn.paused();
    s = conn.Flush();
    if (!s.ok()) {
      Close(conn, std::string(s.message()), false);
      return false;
    }
    if (!(was_paused && !conn.paused() && conn.has_buffered_input())) return true;
  }
}

void StoreLoop::Send(ConnectionId id, std::span<const std::string_view> parts) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  it->second->Queue(parts);
  dirty_.push_back(id);
}

void StoreLoop::FlushDirty() {
  // Wake-ups queued output on connections other than the one that was read;
  // write it now rather than waiting for EPOLLOUT. Service may append to
  // dirty_, so index-loop.
  for (size_t i = 0; i < dirty_.size(); ++i) {
    auto it = connections_.find(dirty_[i]);
    if (it == connections_.end()) continue;
    Connection& conn = *it->second;
    if (!Service(conn)) continue;
    UpdateInterest(conn);
  }
  dirty_.clear();
}

void StoreLoop::UpdateInterest(Connection& conn) {
  uint32_t want = (conn.paused() ? 0u : uint32_t{EPOLLIN}) |
                  (conn.pending_output() > 0 ? uint32_t{EPOLLOUT} : 0u);
  if (want == conn.registered_events) return;
  if (absl::Status s = loop_->Modify(conn.fd(), want); !s.ok()) {
    spdlog::error("c10d store: {}", s.ToString());
  }
  conn.registered_events = want;
}

void StoreLoop::Close(Connection& conn, std::string_view reason, bool warn) {
  if (warn) {
    spdlog::warn("c10d store: closing connection from {}: {}", conn.peer(), reason);
  } else {
    spdlog::debug("c10d store: connection from {} closed: {}", conn.peer(), reason);
  }
  state_.DropConnection(conn.id());
  loop_->Remove(conn.fd());
  connections_.erase(conn.id());  // destroys `conn`, closing its fd
  --num_connections_;
  if (connection_gauge_) --*connection_gauge_;
}

}  // namespace muster::c10d
