// ScrapeServer: the HTTP side of --metrics-port. Answers `GET /metrics` (and HEAD) with
// what `render` returns, one request per connection (Connection: close); any other path
// is 404, any other method 405. One thread runs one epoll reactor (base/event_loop.h), so
// a connection that sends nothing, or a byte a minute, costs one fd and never holds up a
// scrape (prometheus-cpp's civetweb had two threads, each held by such a client for its
// 30 s request timeout).
//
// Bounded: each connection has Options::deadline from accept to its answer being read
// (after which it is closed, whatever its state), and at most Options::max_connections are
// open: a new connection past that closes the oldest, as does an accept that fails for want
// of fds. Idle (no connection open) the thread sleeps in epoll_wait with no timeout.
//
// Owned by MetricsServer; the destructor stops the thread. `render` runs on that thread.
#ifndef MUSTER_METRICS_SCRAPE_SERVER_H_
#define MUSTER_METRICS_SCRAPE_SERVER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace muster::metrics {

class ScrapeServer {
 public:
  struct Options {
    // From accept to the answer's last byte: Prometheus sends its request at once and
    // times out after 10 s by default (scrape_timeout).
    absl::Duration deadline = absl::Seconds(10);
    // Prometheus needs one connection, a person's curl another; the agent's fds are for
    // its workers first (RLIMIT_NOFILE is often 1024).
    size_t max_connections = 64;
  };
  using Render = std::function<std::string()>;

  // `listen_address` like "[::]:9400" (dual-stack), "127.0.0.1:9400" or "[fd00::1]:0" (0: a
  // free port, see port()). Unavailable when it cannot be bound, the message naming `flag`.
  static absl::StatusOr<std::unique_ptr<ScrapeServer>> Start(const std::string& listen_address,
                                                             const std::string& flag, Render render,
                                                             Options options);
  ~ScrapeServer();

  int port() const;

  class Impl;

 private:
  explicit ScrapeServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::metrics

#endif  // MUSTER_METRICS_SCRAPE_SERVER_H_
