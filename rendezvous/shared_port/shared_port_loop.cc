#include "rendezvous/shared_port/shared_port_loop.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "base/status_macros.h"
#include "rendezvous/c10d/listener.h"
#include "spdlog/spdlog.h"

namespace muster::shared_port {

absl::StatusOr<std::unique_ptr<SharedPortLoop>> SharedPortLoop::Create(
    UniqueFd listener, SharedPort::Options options) {
  ASSIGN_OR_RETURN(std::unique_ptr<EventLoop> loop, EventLoop::Create());
  std::unique_ptr<SharedPortLoop> port(new SharedPortLoop(std::move(loop), std::move(options)));
  SharedPortLoop* self = port.get();
  ASSIGN_OR_RETURN(port->acceptor_,
                   Acceptor::Start(port->loop_.get(), std::move(listener), {.what = "shared port"},
                                   [self](UniqueFd socket, const sockaddr_storage& peer) {
                                     self->Accepted(std::move(socket), peer);
                                   }));
  return port;
}

SharedPortLoop::SharedPortLoop(std::unique_ptr<EventLoop> loop, SharedPort::Options options)
    : loop_(std::move(loop)), options_(std::move(options)) {}

void SharedPortLoop::Stop() { loop_->Quit(); }

void SharedPortLoop::Run() {
  absl::Status ran = loop_->Run();
  if (!ran.ok()) spdlog::error("shared port: {}; stopping", ran.ToString());
  for (auto& [id, u] : undecided_) Forget(u);
  undecided_.clear();
}

void SharedPortLoop::Accepted(UniqueFd socket, const sockaddr_storage& addr) {
  std::string peer = c10d::FormatPeer(&addr);
  if (undecided_.size() >= options_.max_undecided) {
    spdlog::warn("shared port: {} connections have not spoken yet; closing the one from {}",
                 undecided_.size(), peer);
    return;
  }
  const uint64_t id = next_id_++;
  // Edge-triggered: a peeked byte stays readable, so only new bytes may wake us.
  absl::Status s = loop_->Add(socket.get(), EPOLLIN | EPOLLRDHUP | EPOLLET, [this, id](uint32_t) {
    if (undecided_.contains(id)) Decide(id, /*at_deadline=*/false);
  });
  if (!s.ok()) {
    spdlog::warn("shared port: dropping connection from {}: {}", peer, s.ToString());
    return;
  }
  EventLoop::TimerId deadline =
      loop_->AddTimer(EventLoop::Now() + options_.decide_timeout, [this, id] {
        auto it = undecided_.find(id);
        if (it == undecided_.end()) return;
        it->second.deadline = 0;  // fired
        Decide(id, /*at_deadline=*/true);
      });
  undecided_.emplace(id, Undecided{std::move(socket), std::move(peer), deadline});
  Decide(id, /*at_deadline=*/false);  // bytes may have come with the handshake
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
  Forget(u);
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
  Forget(it->second);
  undecided_.erase(it);
}

void SharedPortLoop::Forget(Undecided& u) {
  loop_->Remove(u.fd.get());
  if (u.deadline != 0) loop_->CancelTimer(u.deadline);
}

}  // namespace muster::shared_port
