// Transport security for rendezvous/grpc: TLS credentials from PEM files, the shared
// bearer token (docs/design.md §4.3: MUSTER_TOKEN / --token-file), and the channel settings every
// client uses. Internal to rendezvous/grpc.
#ifndef MUSTER_RENDEZVOUS_GRPC_CREDENTIALS_H_
#define MUSTER_RENDEZVOUS_GRPC_CREDENTIALS_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace muster::rdzv::grpc_internal {

// All empty: insecure. cert+key: TLS. client_ca: also require and verify client certs.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const std::string& cert_file, const std::string& key_file, const std::string& client_ca_file);

// All empty: insecure. ca: TLS verifying the server against it; cert+key: client cert.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const std::string& ca_file, const std::string& cert_file, const std::string& key_file);

// A channel with reconnect and DNS backoff short enough for a rendezvous (gRPC's
// defaults wait up to 2 minutes between attempts and 30 s between resolutions). With a
// non-zero `keepalive_time` the connection has TCP keepalive (tcp_keepalive.h): the
// kernel probes the server after that much silence and resets the connection (failing its
// streams) when the server stays silent for `keepalive_time` + `keepalive_timeout`: how an
// agent cut off by a partition learns that it lost the server.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& endpoint,
                                           std::shared_ptr<grpc::ChannelCredentials> creds,
                                           absl::Duration keepalive_time = absl::ZeroDuration(),
                                           absl::Duration keepalive_timeout = absl::ZeroDuration());

// Unauthenticated (with a message that says what is wrong) unless `context` carries
// "authorization: Bearer <token>". An empty `token` accepts everything.
absl::Status CheckBearerToken(const grpc::ServerContextBase& context, const std::string& token);
void AddBearerToken(const std::string& token, grpc::ClientContext* context);

}  // namespace muster::rdzv::grpc_internal

#endif  // MUSTER_RENDEZVOUS_GRPC_CREDENTIALS_H_
