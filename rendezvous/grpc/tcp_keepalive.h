// TCP keepalive on gRPC's connections: the kernel checks that the peer is reachable, so
// no user-space message is needed for liveness under partitions (docs/design.md §4.3;
// docs/operations/liveness-and-partitions.md "muster's own rendezvous (gRPC)"). On every connection
// socket gRPC opens or accepts, it sets SO_KEEPALIVE with TCP_KEEPIDLE = TCP_KEEPINTVL =
// `probe_interval` (whole seconds, at least 1) and TCP_USER_TIMEOUT = `timeout`: once the peer has
// been silent that long (probes unanswered, or data unacknowledged) the kernel resets the
// connection, the stream fails, and the node is lost on the same path as a closed stream. Probes
// and their ACKs are kernel work on both ends; neither process wakes up for them. TLS runs on top
// of the same TCP socket and changes nothing. What it cannot see: a peer process that is alive but
// stuck (its kernel still answers).
//
// The options go in through gRPC's socket mutator, whose definition gRPC 1.51 does not
// install (src/core/lib/iomgr/socket_mutator.h); tcp_keepalive.cc declares the same
// layout and refuses to build against another gRPC version.
#ifndef MUSTER_RENDEZVOUS_GRPC_TCP_KEEPALIVE_H_
#define MUSTER_RENDEZVOUS_GRPC_TCP_KEEPALIVE_H_

#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace muster::rdzv::grpc_internal {

struct TcpKeepalive {
  absl::Duration probe_interval = absl::Seconds(5);
  absl::Duration timeout = absl::Seconds(15);
};

// Sets the options on one connected TCP socket. InvalidArgument for a non-positive
// interval or timeout; Internal naming the option and errno when setsockopt fails.
absl::Status SetTcpKeepalive(int fd, const TcpKeepalive& keepalive);

// Every connection `args` makes gets the options (client channels).
void AddTcpKeepalive(const TcpKeepalive& keepalive, grpc::ChannelArguments* args);

// Every connection the server accepts gets the options.
void AddTcpKeepalive(const TcpKeepalive& keepalive, grpc::ServerBuilder* builder);

}  // namespace muster::rdzv::grpc_internal

#endif  // MUSTER_RENDEZVOUS_GRPC_TCP_KEEPALIVE_H_
