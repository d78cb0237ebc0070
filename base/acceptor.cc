#include "base/acceptor.h"

#include <sys/epoll.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/errno_status.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"

namespace muster {

absl::StatusOr<std::unique_ptr<Acceptor>> Acceptor::Start(EventLoop* loop, UniqueFd listener,
                                                          Options options, OnAccepted on_accepted) {
  std::unique_ptr<Acceptor> acceptor(
      new Acceptor(loop, std::move(listener), std::move(options), std::move(on_accepted)));
  Acceptor* self = acceptor.get();
  RETURN_IF_ERROR(loop->Add(self->fd(), EPOLLIN, [self](uint32_t) { self->AcceptAll(); }));
  return acceptor;
}

Acceptor::Acceptor(EventLoop* loop, UniqueFd listener, Options options, OnAccepted on_accepted)
    : loop_(loop),
      listener_(std::move(listener)),
      options_(std::move(options)),
      on_accepted_(std::move(on_accepted)) {}

Acceptor::~Acceptor() {
  if (resume_ != 0) loop_->CancelTimer(resume_);
  loop_->Remove(listener_.get());
}

void Acceptor::AcceptAll() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    int fd = accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      on_accepted_(UniqueFd(fd), peer);
      continue;
    }
    const int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK) return;  // none left
    // A signal, or a peer that gave up between its SYN and the accept: the next one.
    if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
    return Rest(err);  // EMFILE/ENFILE/ENOBUFS/ENOMEM, or worse
  }
}

void Acceptor::Rest(int err) {
  spdlog::warn("{}: accept: {}; not accepting for {}", options_.what, std::strerror(err),
               absl::FormatDuration(options_.rest));
  // Watched for nothing rather than removed: the fd keeps its place in the epoll set.
  if (absl::Status paused = loop_->Modify(listener_.get(), 0); !paused.ok()) {
    spdlog::error("{}: {}", options_.what, paused.ToString());
  }
  resume_ = loop_->AddTimer(EventLoop::Now() + options_.rest, [this] {
    resume_ = 0;
    if (absl::Status resumed = loop_->Modify(listener_.get(), EPOLLIN); !resumed.ok()) {
      spdlog::error("{}: cannot watch the port again: {}", options_.what, resumed.ToString());
    }
  });
}

}  // namespace muster
