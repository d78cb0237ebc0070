#include "rendezvous/etcd/liveness.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/acceptor.h"
#include "base/endpoint.h"
#include "base/errno_status.h"
#include "base/event_loop.h"
#include "base/status_macros.h"
#include "base/unique_fd.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {

namespace {

constexpr char kTag[] = "muster-liveness";
constexpr char kBye = 'B';
constexpr size_t kMaxHello = 512;
// A peer that connected says who it is at once; a connect gets as long (then the lease
// decides, as without liveness).
constexpr absl::Duration kGreetWithin = absl::Seconds(5);
// Out of file descriptors: stop accepting for a while instead of spinning.
constexpr absl::Duration kAcceptPause = absl::Seconds(1);

struct Conn {
  UniqueFd fd;
  bool outgoing = false;
  bool connecting = false;  // outgoing, connect() in flight
  bool greeted = false;     // incoming: its hello was read; outgoing: ours was sent
  bool bye = false;         // the far end closes on purpose
  std::string node_id;      // incoming: from its hello; outgoing: the coordinator
  int64_t lease = 0;
  std::string hello;                // incoming, until greeted
  EventLoop::TimerId deadline = 0;  // until greeted: the connection is closed then
};

// "muster-liveness NODE_ID LEASE_HEX" (without the newline) -> node id, lease.
bool ParseHello(absl::string_view line, std::string* node_id, int64_t* lease) {
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || parts[0] != kTag || parts[1].empty()) return false;
  uint64_t value = 0;
  const char* end = parts[2].data() + parts[2].size();
  auto [ptr, ec] = std::from_chars(parts[2].data(), end, value, 16);
  if (ec != std::errc() || ptr != end || value == 0) return false;
  *node_id = std::string(parts[1]);
  *lease = static_cast<int64_t>(value);
  return true;
}

absl::StatusOr<std::string> NumericAddress(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  int port = 0;
  const void* where = nullptr;
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    where = &in->sin_addr;
    port = ntohs(in->sin_port);
  } else {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    where = &in6->sin6_addr;
    port = ntohs(in6->sin6_port);
  }
  if (inet_ntop(addr.ss_family, where, text, sizeof text) == nullptr) {
    return ErrnoStatus("inet_ntop", errno);
  }
  return JoinHostPort(text, port);
}

// A listening socket on `host` (a name or an address), port 0; its numeric address.
absl::StatusOr<std::pair<UniqueFd, std::string>> Listen(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "0", &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("getaddrinfo ", host, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  UniqueFd fd(socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  if (bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0) return ErrnoStatus("bind", errno);
  if (listen(fd.get(), 4096) != 0) return ErrnoStatus("listen", errno);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return ErrnoStatus("getsockname", errno);
  }
  absl::StatusOr<std::string> address = NumericAddress(bound);
  if (!address.ok()) return address.status();
  return std::make_pair(std::move(fd), *std::move(address));
}

}  // namespace

class Liveness::Impl {
 public:
  Impl(std::unique_ptr<EventLoop> loop, std::string address, std::string hello, EndedFn on_ended)
      : loop_(std::move(loop)),
        address_(std::move(address)),
        hello_(std::move(hello)),
        on_ended_(std::move(on_ended)) {}

  // Out of descriptors, the listener rests a second (base/acceptor.h); then the thread.
  absl::Status Start(UniqueFd listener) {
    ASSIGN_OR_RETURN(acceptor_, Acceptor::Start(loop_.get(), std::move(listener),
                                                {.what = "liveness", .rest = kAcceptPause},
                                                [this](UniqueFd socket, const sockaddr_storage&) {
                                                  Accepted(std::move(socket));
                                                }));
    thread_ = std::thread([this] {
      absl::Status ran = loop_->Run();
      if (!ran.ok()) {
        spdlog::error("liveness: {}; a dead agent is now seen by its lease only", ran.ToString());
      }
    });
    return absl::OkStatus();
  }

  ~Impl() {
    if (thread_.joinable()) {
      Post([this] { loop_->Quit(); });  // after the commands posted before
      thread_.join();
    }
    for (auto& [fd, conn] : conns_) SayByeAndDrop(conn);
  }

  const std::string& address() const { return address_; }

  // Runs `command` on the liveness thread.
  void Post(std::function<void()> command) { loop_->Post(std::move(command)); }

  void Follow(const std::string& node_id, int64_t lease, const std::string& address) {
    for (auto it = conns_.begin(); it != conns_.end();) {
      it = it->second.outgoing ? Close(it) : std::next(it);
    }
    if (address.empty()) return;
    absl::Status connected = Connect(node_id, lease, address);
    if (!connected.ok()) {
      spdlog::warn(
          "etcd rendezvous: cannot connect to coordinator {}'s liveness address {} ({}): its "
          "death will be seen when its lease ends",
          node_id, address, std::string(connected.message()));
    }
  }

  void Forget(const std::string& node_id) {
    for (auto it = conns_.begin(); it != conns_.end();) {
      it = !it->second.outgoing && it->second.node_id == node_id ? Close(it) : std::next(it);
    }
  }

 private:
  using Conns = std::map<int, Conn>;  // by fd

  void Accepted(UniqueFd socket) {
    Conn conn;
    conn.fd = std::move(socket);
    Watch(std::move(conn), EPOLLIN | EPOLLRDHUP);
  }

  // Serves `conn` on the loop, which gives it kGreetWithin to greet; false when it could
  // not be watched (it is closed).
  bool Watch(Conn conn, uint32_t events) {
    const int fd = conn.fd.get();
    absl::Status watched = loop_->Add(fd, events, [this, fd](uint32_t ready) {
      auto it = conns_.find(fd);
      if (it != conns_.end() && !Serve(it->second, ready)) Drop(it);
    });
    if (!watched.ok()) {
      spdlog::warn("liveness: {}", watched.ToString());
      return false;
    }
    conn.deadline = loop_->AddTimer(EventLoop::Now() + kGreetWithin, [this, fd] { Expire(fd); });
    conns_.emplace(fd, std::move(conn));
    return true;
  }

  // Stops watching the connection at `it` and forgets it: its far end closed, or it is
  // not the protocol.
  Conns::iterator Drop(Conns::iterator it) {
    loop_->Remove(it->first);
    Greeted(it->second);
    return conns_.erase(it);
  }

  // A close on purpose, with a bye (SayByeAndDrop).
  Conns::iterator Close(Conns::iterator it) {
    loop_->Remove(it->first);
    SayByeAndDrop(it->second);
    Greeted(it->second);
    return conns_.erase(it);
  }

  // No deadline any more: it greeted, or it is closed.
  void Greeted(Conn& conn) {
    if (conn.deadline != 0) loop_->CancelTimer(std::exchange(conn.deadline, 0));
  }

  // Handles `events` on `conn`; false when it is done with (closed).
  bool Serve(Conn& conn, uint32_t events) {
    if (conn.connecting) {
      if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return true;
      return Greet(conn);
    }
    char buf[256];
    for (;;) {
      const ssize_t got = read(conn.fd.get(), buf, sizeof buf);
      if (got > 0) {
        if (!Take(conn, absl::string_view(buf, static_cast<size_t>(got)))) {
          SayByeAndDrop(conn);
          return false;
        }
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      // EOF: the far end's kernel closed it. A reset (or another error) is not counted: a
      // close with unread data resets too.
      if (got == 0 && conn.greeted && !conn.bye) on_ended_(conn.node_id, conn.lease);
      return false;
    }
  }

  // Bytes read from `conn`; false when they are not the protocol.
  bool Take(Conn& conn, absl::string_view bytes) {
    if (!conn.outgoing && !conn.greeted) {
      const size_t newline = bytes.find('\n');
      const absl::string_view part = bytes.substr(0, newline);
      conn.hello.append(part.data(), part.size());
      if (conn.hello.size() > kMaxHello) return false;
      if (newline == absl::string_view::npos) return true;
      if (!ParseHello(conn.hello, &conn.node_id, &conn.lease)) {
        spdlog::warn("liveness: a connection that is not an agent's was closed");
        return false;
      }
      conn.greeted = true;
      Greeted(conn);
      bytes.remove_prefix(newline + 1);
    }
    if (bytes.find(kBye) != absl::string_view::npos) conn.bye = true;
    return true;
  }

  absl::Status Connect(const std::string& node_id, int64_t lease, const std::string& address) {
    absl::StatusOr<Endpoint> at = ParseEndpoint("liveness address", address, 0);
    if (!at.ok()) return at.status();
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(at->port);
    if (int rc = getaddrinfo(at->host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      return absl::InvalidArgumentError(absl::StrCat("getaddrinfo: ", gai_strerror(rc)));
    }
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
    Conn conn;
    conn.outgoing = true;
    conn.node_id = node_id;
    conn.lease = lease;
    conn.fd = UniqueFd(socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!conn.fd.valid()) return ErrnoStatus("socket", errno);
    if (connect(conn.fd.get(), found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
      return ErrnoStatus("connect", errno);
    }
    conn.connecting = true;
    if (!Watch(std::move(conn), EPOLLOUT | EPOLLIN | EPOLLRDHUP)) {
      return absl::InternalError("epoll_ctl failed");
    }
    return absl::OkStatus();
  }

  // The outgoing connection is up (or failed): sends the hello; false when it is done with.
  bool Greet(Conn& conn) {
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(conn.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == 0 &&
        write(conn.fd.get(), hello_.data(), hello_.size()) != static_cast<ssize_t>(hello_.size())) {
      err = errno != 0 ? errno : EIO;  // a hello this small is never written in part
    }
    if (err != 0) {
      spdlog::warn(
          "etcd rendezvous: cannot reach coordinator {}'s liveness port ({}): its death will be "
          "seen when its lease ends",
          conn.node_id, std::strerror(err));
      return false;
    }
    conn.connecting = false;
    conn.greeted = true;
    Greeted(conn);
    if (absl::Status s = loop_->Modify(conn.fd.get(), EPOLLIN | EPOLLRDHUP); !s.ok()) {
      spdlog::warn("liveness: {}", s.ToString());
      return false;
    }
    return true;
  }

  // A connection that did not greet in time is closed.
  void Expire(int fd) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return;
    it->second.deadline = 0;  // this one fired
    if (it->second.outgoing) {
      spdlog::warn(
          "etcd rendezvous: no answer from coordinator {}'s liveness port within {}: its "
          "death will be seen when its lease ends",
          it->second.node_id, absl::FormatDuration(kGreetWithin));
    }
    Close(it);
  }

  // A close on purpose: what was sent to it is read first (a close with unread data
  // resets), then the bye, so the far end does not take the close for a death.
  static void SayByeAndDrop(Conn& conn) {
    char buf[256];
    while (read(conn.fd.get(), buf, sizeof buf) > 0) {
    }
    if (!conn.connecting) {
      // Not fatal: the far end then takes it for a death; ours (its lease) says otherwise
      // only when it is ours that ends.
      (void)!write(conn.fd.get(), &kBye, 1);
    }
    conn.fd.reset();
  }

  const std::unique_ptr<EventLoop> loop_;
  const std::string address_;
  const std::string hello_;
  const EndedFn on_ended_;

  // The liveness thread's own.
  std::unique_ptr<Acceptor> acceptor_;
  Conns conns_;
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<Liveness>> Liveness::Start(const std::string& host,
                                                          const std::string& self_id,
                                                          int64_t self_lease, EndedFn on_ended) {
  absl::StatusOr<std::pair<UniqueFd, std::string>> listener = Listen(host);
  if (!listener.ok()) return listener.status();
  ASSIGN_OR_RETURN(std::unique_ptr<EventLoop> loop, EventLoop::Create());
  std::string hello = absl::StrCat(kTag, " ", self_id, " ", absl::Hex(self_lease), "\n");
  auto impl = std::make_unique<Impl>(std::move(loop), std::move(listener->second), std::move(hello),
                                     std::move(on_ended));
  RETURN_IF_ERROR(impl->Start(std::move(listener->first)));
  return std::unique_ptr<Liveness>(new Liveness(std::move(impl)));
}

Liveness::Liveness(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Liveness::~Liveness() = default;

const std::string& Liveness::address() const { return impl_->address(); }

void Liveness::Follow(const std::string& node_id, int64_t lease, const std::string& address) {
  impl_->Post(
      [impl = impl_.get(), node_id, lease, address] { impl->Follow(node_id, lease, address); });
}

void Liveness::Forget(const std::string& node_id) {
  impl_->Post([impl = impl_.get(), node_id] { impl->Forget(node_id); });
}

}  // namespace muster::rdzv::etcd
