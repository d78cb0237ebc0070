// SharedPort: the job's one listening port (docs/design.md §4.3 "Ports"). It accepts every
// connection, waits for the connection's first bytes without consuming them (MSG_PEEK)
// and hands the socket to the gRPC rendezvous (HTTP/2 preface) or to the c10d store
// (anything else, or silence until `decide_timeout`: torch 1.13's second store connection
// never speaks first). See first_bytes.h for the rule.
//
// One thread runs one reactor (base/event_loop.h, base/acceptor.h); a connection that
// sends nothing delays no other: each waits on its own deadline, a timer of the loop. Handlers run
// on that thread and must not block; they take ownership of the socket (non-blocking,
// close-on-exec). The caller owns the SharedPort; the destructor stops the thread and closes the
// listener and every undecided connection. port() is thread-safe.
#ifndef MUSTER_RENDEZVOUS_SHARED_PORT_SHARED_PORT_H_
#define MUSTER_RENDEZVOUS_SHARED_PORT_SHARED_PORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"

namespace muster::shared_port {

class SharedPortLoop;

class SharedPort {
 public:
  // Takes a connected socket and the peer's "addr:port" for logs.
  using Handler = std::function<void(UniqueFd socket, std::string peer)>;

  struct Options {
    std::string bind_address = "::";  // numeric; "::" is dual-stack, falls back to 0.0.0.0
    uint16_t port = 0;                // 0: ephemeral, see port()
    // A connection silent this long goes to the store; one that began the HTTP/2 preface
    // and stalled is closed.
    absl::Duration decide_timeout = absl::Seconds(2);
    // Undecided connections beyond this many are closed at once (a flood of silent peers).
    size_t max_undecided = 4096;
    Handler on_http2;
    Handler on_store;
  };

  static absl::StatusOr<std::unique_ptr<SharedPort>> Start(Options options);
  ~SharedPort();
  SharedPort(const SharedPort&) = delete;
  SharedPort& operator=(const SharedPort&) = delete;

  uint16_t port() const { return port_; }
  const std::string& address() const { return address_; }  // "[::]:29500", for logs

 private:
  SharedPort(std::unique_ptr<SharedPortLoop> loop, uint16_t port, std::string address);

  std::unique_ptr<SharedPortLoop> loop_;
  uint16_t port_;
  std::string address_;
  std::thread thread_;
};

}  // namespace muster::shared_port

#endif  // MUSTER_RENDEZVOUS_SHARED_PORT_SHARED_PORT_H_
