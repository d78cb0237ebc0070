// Listening TCP socket for the store: wildcard dual-stack bind like torch's
// TCPStore (reference/torch_contract.md §1.5, §5.1.1). Free functions;
// thread-safe.
#ifndef MUSTER_RENDEZVOUS_C10D_LISTENER_H_
#define MUSTER_RENDEZVOUS_C10D_LISTENER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/unique_fd.h"

namespace muster::c10d {

struct BoundListener {
  UniqueFd fd;          // non-blocking, close-on-exec, listening
  uint16_t port = 0;    // the bound port (useful when 0 was requested)
  std::string address;  // what was bound, for logs: "[::]:29500", "0.0.0.0:29500"
};

// Binds `address` (numeric IPv4/IPv6; "::" means dual-stack with IPV6_V6ONLY=0,
// falling back to 0.0.0.0 when IPv6 is unavailable) with SO_REUSEADDR and
// listens with a backlog of /proc/sys/net/core/somaxconn. Errors start with
// "<what> on <address> port <port>: ".
absl::StatusOr<BoundListener> Listen(const std::string& address, uint16_t port,
                                     std::string_view what = "c10d store");

// /proc/sys/net/core/somaxconn, or SOMAXCONN when unreadable.
int ListenBacklog();

// "[v6]:port" / "v4:port" of an accepted peer, for log lines.
std::string FormatPeer(const void* sockaddr_storage_ptr);

}  // namespace muster::c10d

#endif  // MUSTER_RENDEZVOUS_C10D_LISTENER_H_
