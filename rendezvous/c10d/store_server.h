// A TCPStore-compatible server that torch workers of every generation can use
// as MASTER_ADDR:MASTER_PORT (reference/torch_contract.md §1, §5.1; DESIGN.md
// §4.2). Each connection is detected as legacy (torch 1.13-2.1) or modern
// (VALIDATE, torch 2.4+).
//
// One thread runs one reactor (base/event_loop.h) over non-blocking sockets; a
// malformed or oversized request closes only its own connection. The caller owns the server;
// Shutdown() and the destructor stop the thread and close every socket. port(),
// Shutdown() and Adopt() are thread-safe. A rendezvous round uses a fresh
// server: on a fresh port, or adopting the connections the job's shared port
// (rendezvous/shared_port) tells apart from the rendezvous's.
#ifndef MUSTER_RENDEZVOUS_C10D_STORE_SERVER_H_
#define MUSTER_RENDEZVOUS_C10D_STORE_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "base/unique_fd.h"
#include "rendezvous/c10d/wire.h"

namespace muster::c10d {

class StoreLoop;

class StoreServer {
 public:
  struct Options {
    // Numeric address; "::" is dual-stack and falls back to 0.0.0.0 without
    // IPv6.
    std::string bind_address = "::";
    uint16_t port = 0;  // 0: ephemeral, read it back with port()
    Limits limits;
    // No listening socket of its own: clients arrive through Adopt() from the
    // listener that owns `port` (reported by port(); bind_address is unused).
    bool adopt_only = false;
    // Called once, first thing in BeginShutdown()/Shutdown(): whoever feeds
    // Adopt() stops doing so.
    std::function<void(StoreServer*)> before_shutdown;
    // When given, follows num_connections(); one gauge may be shared by every round's
    // store (the agent's metrics read it from another thread).
    std::shared_ptr<std::atomic<int64_t>> connection_gauge;
  };

  // Binds, then starts the loop thread. The port accepts connections once this
  // returns.
  static absl::StatusOr<std::unique_ptr<StoreServer>> Start(const Options& options);

  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  uint16_t port() const { return port_; }

  // Serves a connected socket (non-blocking) that another listener accepted;
  // its first bytes may already be waiting. Closed unserved after Shutdown().
  void Adopt(UniqueFd socket, std::string peer);

  // Open client connections right now (for tests and status reports).
  size_t num_connections() const;

  // Stops the loop and closes every connection. Idempotent.
  void Shutdown();
  // Tells the loop to stop without waiting for it, so that its thread winds down while the
  // caller does other work; Shutdown() (or the destructor) then only waits. Idempotent.
  void BeginShutdown();

 private:
  StoreServer(std::unique_ptr<StoreLoop> loop, uint16_t port, std::string address,
              std::function<void(StoreServer*)> before_shutdown);
  void Detach();

  std::unique_ptr<StoreLoop> loop_;
  uint16_t port_;
  std::string address_;  // "[::]:29500" or "0.0.0.0:29500", for the log line
  std::function<void(StoreServer*)> before_shutdown_;
  std::once_flag detach_once_;
  std::once_flag shutdown_once_;
  std::thread thread_;
};

}  // namespace muster::c10d

#endif  // MUSTER_RENDEZVOUS_C10D_STORE_SERVER_H_
