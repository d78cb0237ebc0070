#include "rendezvous/shared_port/shared_port_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "base/errno_status.h"
#include "rendezvous/c10d/listener.h"
#include "spdlog/spdlog.h"

namespace muster::shared_port {
namespace {

// epoll_event.data.u64 tags; connection ids start above them and are never reused.
constexpr uint64_t kListenerTag = 0;
constexpr uint64_t kWakeTag = 1;
constexpr uint64_t kFirstId = 2;
constexpr int kMaxEvents = 128;
// After EMFILE the listener rests this long instead of spinning on a ready backlog.
constexpr absl::Duration kAcceptRetry = absl::Milliseconds(100);

absl::Status EpollCtl(int epoll, int op, int fd, uint32_t events, uint64_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll, op, fd, &ev) != 0) return ErrnoStatus("epoll_ctl", errno);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedPortLoop>> SharedPortLoop::Create(
    UniqueFd listener, SharedPort::Options options) {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return ErrnoStatus("epoll_create1", errno);
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return ErrnoStatus("eventfd", errno);
  absl::Status s = EpollCtl(epoll.get(), EPOLL_CTL_ADD, listener.get(), EPOLLIN, kListenerTag);
  if (s.ok()) s = EpollCtl(epoll.get(), EPOLL_CTL_ADD, wake.get(), EPOLLIN, kWakeTag);
  if (!s.ok()) return s;
  return std::unique_ptr<SharedPortLoop>(new SharedPortLoop(std::move(listener), std::move(epoll),
                                                            std::move(wake), std::move(options)));
}

SharedPortLoop::SharedPortLoop(UniqueFd listener, UniqueFd epoll, UniqueFd wake,
                               SharedPort::Options options)
    : listener_(std::move(listener)),
      epoll_(std::move(epoll)),
      wake_(std::move(wake)),
      options_(std::move(options)),
      next_id_(kFirstId) {}

void SharedPortLoop::Stop() {
  uint64_t one = 1;
  // EAGAIN: the counter is already non-zero, the loop is being woken anyway.
  (void)!::write(wake_.get(), &one, sizeof(one));
}

void SharedPortLoop::Run() {
  epoll_event events[kMaxEvents];
  while (!stopping_) {
    int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, NextTimeoutMs(absl::Now()));
    if (n < 0) {
      if (errno == EINTR) continue;  // a signal delivered to this thread; nothing to do
      spdlog::error("shared port: epoll_wait: {}; stopping", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kListenerTag) {
        AcceptAll();
      } else if (tag == kWakeTag) {
        stopping_ = true;
      } else {
        OnReadable(tag);
      }
    }
    absl::Time now = absl::Now();
    if (listener_paused_until_ != absl::InfinitePast() && now >= listener_paused_until_) {
      listener_paused_until_ = absl::InfinitePast();
      (void)EpollCtl(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), EPOLLIN, kListenerTag);
    }
    ExpireDeadlines(now);
  }
  undecided_.clear();
}

int SharedPortLoop::NextTimeoutMs(absl::Time now) const {
  absl::Time next = absl::InfiniteFuture();
  if (listener_paused_until_ != absl::InfinitePast()) next = listener_paused_until_;
  for (uint64_t id : by_deadline_) {  // stale ids (handed over) are skipped
    auto it = undecided_.find(id);
    if (it == undecided_.end()) continue;
    next = std::min(next, it->second.deadline);
    break;
  }
  if (next == absl::InfiniteFuture()) return -1;
  if (next <= now) return 0;
  return static_cast<int>(
      std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(next - now, absl::Milliseconds(1))),
                        std::numeric_limits<int>::max()));
}

void SharedPortLoop::AcceptAll() {
  while (true) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      // The peer gave up between SYN and accept, or a signal: take the next one.
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      // EMFILE/ENFILE/ENOBUFS/ENOMEM: out of resources; rest instead of spinning.
      spdlog::warn("shared port: accept: {} ({} undecided); retrying in {}", std::strerror(err),
                   undecided_.size(), absl::FormatDuration(kAcceptRetry));
      (void)EpollCtl(epoll_.get(), EPOLL_CTL_MOD, listener_.get(), 0, kListenerTag);
      listener_paused_until_ = absl::Now() + kAcceptRetry;
      return;
    }
    UniqueFd conn(fd);
    std::string peer = c10d::FormatPeer(&addr);
    if (undecided_.size() >= options_.max_undecided) {
      spdlog::warn("shared port: {} connections have not spoken yet; closing the one from {}",
                   undecided_.size(), peer);
      continue;
    }
    uint64_t id = next_id_++;
    // Edge-triggered: a peeked byte stays readable, so only new bytes may wake us.
    absl::Status s = EpollCtl(epoll_.get(), EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLRDHUP | EPOLLET, id);
    if (!s.ok()) {
      spdlog::warn("shared port: dropping connection from {}: {}", peer, s.ToString());
      continue;
    }
    undecided_.emplace(
        id, Undecided{std::move(conn), std::move(peer), absl::Now() + options_.decide_timeout});
    by_deadline_.push_back(id);
    Decide(id, /*at_deadline=*/false);  // bytes may have come with the handshake
  }
}

void SharedPortLoop::OnReadable(uint64_t id) {
  if (undecided_.contains(id)) Decide(id, /*at_deadline=*/false);
}

void SharedPortLoop::ExpireDeadlines(absl::Time now) {
  while (!by_deadline_.empty()) {
    auto it = undecided_.find(by_deadline_.front());
    if (it != undecided_.end() && it->second.deadline > now) return;
    uint64_t id = by_deadline_.front();
    by_deadline_.pop_front();
    if (it != undecided_.end()) Decide(id, /*at_deadline=*/true);
  }
}

void SharedPortLoop::Decide(uint64_t id, bool at_deadline) {
  Undecided& u = undecided_.at(id);
  char buf[kHttp2Preface.size()];
  ssize_t n = ::recv(u.fd.get(), buf, sizeof(buf), MSG_PEEK);
  if (n == 0) return Drop(id, "closed before it spoke");
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    return Drop(id, std::strerror(errno));
  }
  std::string_view received(buf, n > 0 ? static_cast<size_t>(n) : 0);
  Protocol p = at_deadline ? ClassifyAtDeadline(received) : ClassifyFirstBytes(received);
  if (p != Protocol::kUndecided) return HandOver(id, p);
  if (at_deadline) Drop(id, "began an HTTP/2 preface and stalled");
}

void SharedPortLoop::HandOver(uint64_t id, Protocol protocol) {
  auto node = undecided_.extract(id);
  Undecided& u = node.mapped();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, u.fd.get(), nullptr);
  const SharedPort::Handler& handler =
      protocol == Protocol::kHttp2 ? options_.on_http2 : options_.on_store;
  spdlog::debug("shared port: connection from {} is {}", u.peer, ProtocolName(protocol));
  if (!handler) {
    spdlog::warn("shared port: closing a {} connection from {}: nothing serves it here",
                 ProtocolName(protocol), u.peer);
    return;
  }
  handler(std::move(u.fd), std::move(u.peer));
}

void SharedPortLoop::Drop(uint64_t id, const char* why) {
  auto it = undecided_.find(id);
  spdlog::debug("shared port: closing connection from {}: {}", it->second.peer, why);
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
  undecided_.erase(it);
}

}  // namespace muster::shared_port
