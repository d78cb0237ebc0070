#include "rendezvous/c10d/store_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/errno_status.h"
#include "rendezvous/c10d/listener.h"
#include "spdlog/spdlog.h"

namespace muster::c10d {
namespace {

// epoll_event.data.u64 tags; connection ids start above them and are never
// reused.
constexpr uint64_t kListenerTag = 0;
constexpr uint64_t kWakeTag = 1;
constexpr uint64_t kInboxTag = 2;
constexpr ConnectionId kFirstConnectionId = 3;
constexpr int kMaxEvents = 256;
// After EMFILE the listener sleeps this long instead of spinning on a ready
// backlog.
constexpr int kAcceptRetryMs = 100;

absl::Status EpollAdd(int epoll, int fd, uint32_t events, uint64_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return ErrnoStatus("epoll_ctl(ADD)", errno);
  }
  return absl::OkStatus();
}

void EpollModify(int epoll, int fd, uint32_t events, uint64_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &ev) != 0) {
    spdlog::error("c10d store: epoll_ctl(MOD): {}", std::strerror(errno));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<StoreLoop>> StoreLoop::Create(
    UniqueFd listener, const Limits& limits,
    std::shared_ptr<std::atomic<int64_t>> connection_gauge) {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return ErrnoStatus("epoll_create1", errno);
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return ErrnoStatus("eventfd", errno);
  UniqueFd inbox(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!inbox.valid()) return ErrnoStatus("eventfd", errno);
  absl::Status s = absl::OkStatus();
  if (listener.valid()) s = EpollAdd(epoll.get(), listener.get(), EPOLLIN, kListenerTag);
  if (!s.ok()) return s;
  s = EpollAdd(epoll.get(), wake.get(), EPOLLIN, kWakeTag);
  if (!s.ok()) return s;
  s = EpollAdd(epoll.get(), inbox.get(), EPOLLIN, kInboxTag);
  if (!s.ok()) return s;
  return std::unique_ptr<StoreLoop>(new StoreLoop(std::move(listener), std::move(epoll),
                                                  std::move(wake), std::move(inbox), limits,
                                                  std::move(connection_gauge)));
}

StoreLoop::StoreLoop(UniqueFd listener, UniqueFd epoll, UniqueFd wake, UniqueFd inbox_wake,
                     const Limits& limits, std::shared_ptr<std::atomic<int64_t>> connection_gauge)
    : listener_(std::move(listener)),
      epoll_(std::move(epoll)),
      wake_(std::move(wake)),
      inbox_wake_(std::move(inbox_wake)),
      limits_(limits),
      next_id_(kFirstConnectionId),
      connection_gauge_(std::move(connection_gauge)) {}

void StoreLoop::Stop() {
  uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the loop is being woken
  // anyway.
  (void)!::write(wake_.get(), &one, sizeof(one));
}

void StoreLoop::Run() {
  epoll_event events[kMaxEvents];
  while (!stopping_) {
    int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, listener_paused_ ? kAcceptRetryMs : -1);
    if (n < 0) {
      if (errno == EINTR) continue;  // a signal delivered to this thread; nothing to do
      spdlog::error("c10d store: epoll_wait: {}; stopping", std::strerror(errno));
      break;
    }
    if (n == 0 && listener_paused_) ResumeListener();
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kListenerTag) {
        AcceptAll();
      } else if (tag == kWakeTag) {
        stopping_ = true;
      } else if (tag == kInboxTag) {
        TakeAdopted();
      } else {
        OnConnectionEvent(tag, events[i].events);
      }
    }
    FlushDirty();
  }
  if (connection_gauge_) *connection_gauge_ -= static_cast<int64_t>(num_connections_.load());
  connections_.clear();
  num_connections_ = 0;
  MutexLock lock(&inbox_mu_);
  inbox_.clear();
}

void StoreLoop::Adopt(UniqueFd socket, std::string peer) {
  {
    MutexLock lock(&inbox_mu_);
    inbox_.emplace_back(std::move(socket), std::move(peer));
  }
  uint64_t one = 1;
  // EAGAIN: the counter is already non-zero, the loop will look at the inbox anyway.
  (void)!::write(inbox_wake_.get(), &one, sizeof(one));
}

void StoreLoop::TakeAdopted() {
  uint64_t count = 0;
  (void)!::read(inbox_wake_.get(), &count, sizeof(count));  // reset before draining
  std::vector<std::pair<UniqueFd, std::string>> adopted;
  {
    MutexLock lock(&inbox_mu_);
    adopted.swap(inbox_);
  }
  for (auto& [socket, peer] : adopted) AddConnection(std::move(socket), std::move(peer));
}

void StoreLoop::AcceptAll() {
  while (true) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      // The peer gave up between SYN and accept, or a signal: try the next one.
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      PauseListener(err);  // EMFILE/ENFILE/ENOBUFS/ENOMEM: out of resources
      return;
    }
    AddConnection(UniqueFd(fd), FormatPeer(&addr));
  }
}

void StoreLoop::AddConnection(UniqueFd socket, std::string peer) {
  int one = 1;
  (void)::setsockopt(socket.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ConnectionId id = next_id_++;
  auto conn = std::make_unique<Connection>(id, std::move(socket), std::move(peer), limits_);
  absl::Status s = EpollAdd(epoll_.get(), conn->fd(), EPOLLIN, id);
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

void StoreLoop::PauseListener(int err) {
  spdlog::warn("c10d store: accept: {} ({} connections open); retrying in {} ms",
               std::strerror(err), connections_.size(), kAcceptRetryMs);
  EpollModify(epoll_.get(), listener_.get(), 0, kListenerTag);
  listener_paused_ = true;
}

void StoreLoop::ResumeListener() {
  EpollModify(epoll_.get(), listener_.get(), EPOLLIN, kListenerTag);
  listener_paused_ = false;
}

void StoreLoop::OnConnectionEvent(ConnectionId id, uint32_t events) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;  // closed earlier in this batch
  Connection& conn = *it->second;
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
  EpollModify(epoll_.get(), conn.fd(), want, conn.id());
  conn.registered_events = want;
}

void StoreLoop::Close(Connection& conn, std::string_view reason, bool warn) {
  if (warn) {
    spdlog::warn("c10d store: closing connection from {}: {}", conn.peer(), reason);
  } else {
    spdlog::debug("c10d store: connection from {} closed: {}", conn.peer(), reason);
  }
  state_.DropConnection(conn.id());
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, conn.fd(), nullptr);
  connections_.erase(conn.id());  // destroys `conn`, closing its fd
  --num_connections_;
  if (connection_gauge_) --*connection_gauge_;
}

}  // namespace muster::c10d
