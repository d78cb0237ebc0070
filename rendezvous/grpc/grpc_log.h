// gRPC's own log lines (gpr_log: "E1124 12:00:00.000 ... chttp2_server.cc:1045] ...") go
// through spdlog instead of straight to stderr, at debug level: the ones a user meets are
// expected (an agent that loses the race to serve the rendezvous port, a peer that hangs
// up) and muster reports what matters in its own words. `--log-level debug` shows them,
// prefixed "grpc:". A failed gRPC assertion (it aborts next) stays visible as critical.
#ifndef MUSTER_RENDEZVOUS_GRPC_GRPC_LOG_H_
#define MUSTER_RENDEZVOUS_GRPC_GRPC_LOG_H_

namespace muster::rdzv {

// Once, before the first gRPC object exists (main does it); thread-safe afterwards.
void RouteGrpcLogsToSpdlog();

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_GRPC_GRPC_LOG_H_
