// Acceptor: the one way a listening socket is served on an EventLoop (docs/design.md §2). On
// readiness it accepts every pending connection (non-blocking, close-on-exec) and hands each to its
// owner. The errnos accept4 returns for one connection only (EINTR, ECONNABORTED, EPROTO) skip it;
// out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) the listener rests for
// `Options::rest` instead of waking the loop again at once on a backlog it cannot take, then is
// watched again.
//
// Owns the listening socket. Created, used and destroyed on the loop's thread; not
// thread-safe. `on_accepted` runs there.
#ifndef MUSTER_BASE_ACCEPTOR_H_
#define MUSTER_BASE_ACCEPTOR_H_

#include <sys/socket.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/event_loop.h"
#include "base/unique_fd.h"

namespace muster {

class Acceptor {
 public:
  // `peer`: the connecting end's address, as accept4 filled it.
  using OnAccepted = std::function<void(UniqueFd socket, const sockaddr_storage& peer)>;

  struct Options {
    std::string what;                               // whose port, for log lines: "c10d store"
    absl::Duration rest = absl::Milliseconds(100);  // out of descriptors: not accepting
  };

  // Watches `listener` (listening, non-blocking) on `loop`, which must outlive it.
  static absl::StatusOr<std::unique_ptr<Acceptor>> Start(EventLoop* loop, UniqueFd listener,
                                                         Options options, OnAccepted on_accepted);
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  int fd() const { return listener_.get(); }

 private:
  Acceptor(EventLoop* loop, UniqueFd listener, Options options, OnAccepted on_accepted);
  void AcceptAll();
  // Out of resources (`err`): stops watching the listener for options_.rest.
  void Rest(int err);

  EventLoop* const loop_;
  const UniqueFd listener_;
  const Options options_;
  const OnAccepted on_accepted_;
  EventLoop::TimerId resume_ = 0;  // while resting
};

}  // namespace muster

#endif  // MUSTER_BASE_ACCEPTOR_H_
