// Reaching the rendezvous server (docs/design.md §4.3): the endpoint may not resolve yet (a
// Service whose DNS record appears late) or not listen yet (the server's Pod starting),
// so both are retried with exponential backoff and jitter inside the join timeout, with
// progress logged. Internal to rendezvous/grpc.
#ifndef MUSTER_RENDEZVOUS_GRPC_CONNECT_H_
#define MUSTER_RENDEZVOUS_GRPC_CONNECT_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/endpoint.h"

namespace muster::rdzv::grpc_internal {

// A gRPC dial target as base/endpoint.h parses it, with its port written out ("host:port",
// "[v6addr]:port"); InvalidArgument otherwise. For text from outside muster's flags (a
// benchmark's); the clients take an Endpoint parsed once, by the flags.
absl::StatusOr<Endpoint> ParseDialTarget(const std::string& endpoint);

// Whether a client may dial `endpoint`: a host and a port; InvalidArgument otherwise.
absl::Status CheckDialTarget(const Endpoint& endpoint);

// Why a gRPC call to `endpoint` got no answer, for error messages: a TLS mismatch when the
// port accepts TCP connections (checked within 1 s), else that nothing listens there.
std::string ExplainNoAnswer(const Endpoint& endpoint);

// Sleeps up to `d`; returns false (at once) when the caller is being stopped.
using InterruptibleSleep = std::function<bool(absl::Duration d)>;

// Returns a connected channel to `endpoint`. Retries name resolution and connection with
// backoff from 100 ms to 2 s (jittered) until `deadline`: Unavailable then, naming the
// last reason; Cancelled when `sleep` reports a stop. `started` is when the wait began
// (for the "12 s of 600 s" progress line).
// `keepalive_time`/`keepalive_timeout`: see MakeChannel.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectWithBackoff(
    const Endpoint& endpoint, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    absl::Time started, absl::Time deadline, const InterruptibleSleep& sleep,
    absl::Duration keepalive_time = absl::ZeroDuration(),
    absl::Duration keepalive_timeout = absl::ZeroDuration());

}  // namespace muster::rdzv::grpc_internal

#endif  // MUSTER_RENDEZVOUS_GRPC_CONNECT_H_
