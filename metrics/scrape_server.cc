#include "metrics/scrape_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <list>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/errno_status.h"
#include "base/event_loop.h"
#include "base/status_macros.h"
#include "base/unique_fd.h"
#include "rendezvous/c10d/listener.h"
#include "spdlog/spdlog.h"

namespace muster::metrics {
namespace {

// A request's head (request line and headers) larger than this is not a scrape.
constexpr size_t kMaxRequestHead = 8192;

struct Connection {
  UniqueFd fd;
  absl::Time deadline;
  std::string in;         // the request head as read so far
  std::string out;        // the answer not yet sent
  bool answered = false;  // the answer is queued; then sent, then the client's close awaited
};

// Host and port of "host:port" / "[v6]:port", without brackets.
absl::StatusOr<std::pair<std::string, uint16_t>> SplitListenAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not HOST:PORT"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "::";
  return std::make_pair(host, static_cast<uint16_t>(port));
}

// `host` as a numeric address: itself when it is one, else its first address.
absl::StatusOr<std::string> NumericHost(const std::string& host) {
  in6_addr v6{};
  in_addr v4{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1 || inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return host;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  char text[INET6_ADDRSTRLEN] = {};
  const void* where =
      found->ai_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(found->ai_addr)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr);
  inet_ntop(found->ai_family, where, text, sizeof text);
  freeaddrinfo(found);
  return std::string(text);
}

std::string Answer(absl::string_view status, absl::string_view content_type,
                   const std::string& body, bool with_body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n",
                      with_body ? body : "");
}

}  // namespace

class ScrapeServer::Impl {
 public:
  Impl(std::unique_ptr<EventLoop> loop, c10d::BoundListener listener, Render render,
       Options options)
      : loop_(std::move(loop)),
        listener_(std::move(listener)),
        render_(std::move(render)),
        options_(options) {}

  absl::Status Start() {
    RETURN_IF_ERROR(loop_->Add(listener_.fd.get(), EPOLLIN, [this](uint32_t) { Accept(); }));
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "muster-metrics");
      while (!stopping_) {
        absl::Status ran = loop_->RunOnce();
        if (!ran.ok()) {
          spdlog::error("metrics: the /metrics server stopped: {}", ran.ToString());
          return;
        }
      }
    });
    return absl::OkStatus();
  }

  ~Impl() {
    if (thread_.joinable()) {
      loop_->Post([this] { stopping_ = true; });
      thread_.join();
    }
    for (auto& c : connections_) loop_->Remove(c.fd.get());
    loop_->Remove(listener_.fd.get());
  }

  int port() const { return listener_.port; }

 private:
  using Connections = std::list<Connection>;  // oldest first: deadline order

  void Accept() {
    for (;;) {
      UniqueFd fd(accept4(listener_.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) {
        if (errno == EINTR || errno == ECONNABORTED) continue;  // a signal; a client gone
        if (errno == EAGAIN) return;                            // none left
        if ((errno == EMFILE || errno == ENFILE) && !connections_.empty()) {
          Close(connections_.begin());  // an fd for the newer client: the oldest one goes
          continue;
        }
        // Out of fds with none of ours to give back (or another error): the listener rests
        // a moment instead of waking the loop at once again.
        spdlog::warn("metrics: accept on the /metrics port: {}",
                     ErrnoStatus("accept4", errno).ToString());
        loop_->Remove(listener_.fd.get());
        loop_->AddTimer(EventLoop::Now() + absl::Milliseconds(100), [this] {
          if (!loop_->Add(listener_.fd.get(), EPOLLIN, [this](uint32_t) { Accept(); }).ok()) {
            spdlog::error("metrics: cannot watch the /metrics port again: no more scrapes");
          }
        });
        return;
      }
      if (connections_.size() >= options_.max_connections) Close(connections_.begin());
      const int raw = fd.get();
      auto it = connections_.insert(
          connections_.end(),
          Connection{.fd = std::move(fd), .deadline = EventLoop::Now() + options_.deadline});
      by_fd_[raw] = it;
      if (!loop_->Add(raw, EPOLLIN, [this, raw](uint32_t events) { OnReady(raw, events); }).ok()) {
        Close(it);
        continue;
      }
      if (connections_.size() == 1) ArmTimer();
    }
  }

  void OnReady(int fd, uint32_t events) {
    auto found = by_fd_.find(fd);
    if (found == by_fd_.end()) return;
    Connections::iterator it = found->second;
    if (it->answered) {
      if (!it->out.empty()) {
        if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) Send(it);
        return;
      }
      if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) Drain(it);
      return;
    }
    char buf[4096];
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;  // a signal; nothing was read
      if (n < 0 && errno == EAGAIN) return;   // the rest of the request comes later
      if (n <= 0) return Close(it);           // the client left (or the socket failed)
      it->in.append(buf, static_cast<size_t>(n));
      size_t end = it->in.find("\r\n\r\n");
      if (end == std::string::npos) end = it->in.find("\n\n");
      if (end != std::string::npos) return Respond(it);
      if (it->in.size() > kMaxRequestHead) {
        it->in.clear();
        return Queue(it, Answer("431 Request Header Fields Too Large", "text/plain",
                                "request head too large\n", true));
      }
    }
  }

  void Respond(Connections::iterator it) {
    // "GET /metrics?x HTTP/1.1"
    const std::string line = it->in.substr(0, it->in.find_first_of("\r\n"));
    const size_t sp1 = line.find(' ');
    const size_t sp2 = line.find(' ', sp1 == std::string::npos ? line.size() : sp1 + 1);
    const std::string method = line.substr(0, sp1);
    std::string path = sp1 == std::string::npos ? "" : line.substr(sp1 + 1, sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
    const bool head = method == "HEAD";
    if (method != "GET" && !head) {
      return Queue(it, Answer("405 Method Not Allowed", "text/plain", "use GET /metrics\n", true));
    }
    if (path != "/metrics") {
      return Queue(it, Answer("404 Not Found", "text/plain", "not found: GET /metrics\n", !head));
    }
    Queue(it, Answer("200 OK", "text/plain; version=0.0.4; charset=utf-8", render_(), !head));
  }

  void Queue(Connections::iterator it, std::string answer) {
    it->answered = true;
    it->in.clear();
    it->out = std::move(answer);
    Send(it);
  }

  void Send(Connections::iterator it) {
    const int fd = it->fd.get();
    while (!it->out.empty()) {
      ssize_t n = send(fd, it->out.data(), it->out.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;  // a signal; nothing was sent
      if (n < 0 && errno == EAGAIN) {
        // The client reads slowly: wait until it has room (still bounded by the deadline).
        loop_->Remove(fd);
        if (!loop_->Add(fd, EPOLLOUT, [this, fd](uint32_t events) { OnReady(fd, events); }).ok()) {
          Close(it);
        }
        return;
      }
      if (n <= 0) return Close(it);  // the client left
      it->out.erase(0, static_cast<size_t>(n));
    }
    // All sent: half-close and wait for the client's close, so that closing with a byte of
    // it unread cannot reset the connection before the answer is read.
    shutdown(fd, SHUT_WR);
    loop_->Remove(fd);
    if (!loop_->Add(fd, EPOLLIN, [this, fd](uint32_t events) { OnReady(fd, events); }).ok()) {
      Close(it);
    }
  }

  void Drain(Connections::iterator it) {
    char buf[4096];
    for (;;) {
      ssize_t n = recv(it->fd.get(), buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;  // a signal; nothing was read
      if (n < 0 && errno == EAGAIN) return;   // the client has not closed yet
      if (n <= 0) return Close(it);           // closed (or failed): done
    }
  }

  void Close(Connections::iterator it) {
    const bool first = it == connections_.begin();
    loop_->Remove(it->fd.get());
    by_fd_.erase(it->fd.get());
    connections_.erase(it);
    if (first) ArmTimer();
  }

  // One timer, for the oldest connection's deadline (deadlines come in accept order); none
  // while no connection is open.
  void ArmTimer() {
    if (timer_ != 0) loop_->CancelTimer(std::exchange(timer_, 0));
    if (connections_.empty()) return;
    timer_ = loop_->AddTimer(connections_.front().deadline, [this] {
      timer_ = 0;
      const absl::Time now = EventLoop::Now();
      while (!connections_.empty() && connections_.front().deadline <= now) {
        Close(connections_.begin());
      }
      ArmTimer();
    });
  }

  std::unique_ptr<EventLoop> loop_;
  c10d::BoundListener listener_;
  const Render render_;
  const Options options_;
  Connections connections_;
  std::unordered_map<int, Connections::iterator> by_fd_;
  EventLoop::TimerId timer_ = 0;
  bool stopping_ = false;  // the loop thread's only
  std::thread thread_;
};

absl::StatusOr<std::unique_ptr<ScrapeServer>> ScrapeServer::Start(const std::string& listen_address,
                                                                  const std::string& flag,
                                                                  Render render, Options options) {
  absl::StatusOr<std::pair<std::string, uint16_t>> split = SplitListenAddress(listen_address);
  if (!split.ok())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", split.status().message()));
  absl::StatusOr<std::string> host = NumericHost(split->first);
  if (!host.ok())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", host.status().message()));
  absl::StatusOr<c10d::BoundListener> listener = c10d::Listen(*host, split->second, flag);
  if (!listener.ok()) {
    return absl::Status(listener.status().code(),
                        absl::StrCat(listener.status().message(), " (port in use?)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<EventLoop> loop, EventLoop::Create());
  auto impl =
      std::make_unique<Impl>(std::move(loop), *std::move(listener), std::move(render), options);
  RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<ScrapeServer>(new ScrapeServer(std::move(impl)));
}

ScrapeServer::ScrapeServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ScrapeServer::~ScrapeServer() = default;

int ScrapeServer::port() const { return impl_->port(); }

}  // namespace muster::metrics
