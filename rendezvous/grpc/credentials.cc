#include "rendezvous/grpc/credentials.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "rendezvous/grpc/tcp_keepalive.h"

namespace muster::rdzv::grpc_internal {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is empty"));
  }
  // gRPC only finds out when the server binds, and then says no more than that it cannot
  // listen: a port in use to the caller (transient), not a bad file (permanent).
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is not PEM (no -----BEGIN line)"));
  }
  return text.str();
}

// Compares without an early exit, so the time taken does not reveal a matching prefix.
bool SameSecret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const std::string& cert_file, const std::string& key_file, const std::string& client_ca_file) {
  if (cert_file.empty() && key_file.empty()) {
    if (!client_ca_file.empty()) {
      return absl::InvalidArgumentError("a TLS client CA needs a server certificate and key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (cert_file.empty() || key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key file");
  }
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(cert_file, "TLS certificate"));
  ASSIGN_OR_RETURN(pair.private_key, ReadPem(key_file, "TLS key"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!client_ca_file.empty()) {
    ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(client_ca_file, "TLS client CA"));
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const std::string& ca_file, const std::string& cert_file, const std::string& key_file) {
  if (ca_file.empty() && cert_file.empty() && key_file.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions options;
  if (!ca_file.empty()) {
    ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(ca_file, "TLS CA"));
  }
  if (!cert_file.empty() || !key_file.empty()) {
    if (cert_file.empty() || key_file.empty()) {
      return absl::InvalidArgumentError("a TLS client certificate needs both cert and key files");
    }
    ASSIGN_OR_RETURN(options.pem_cert_chain, ReadPem(cert_file, "TLS certificate"));
    ASSIGN_OR_RETURN(options.pem_private_key, ReadPem(key_file, "TLS key"));
  }
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& endpoint,
                                           std::shared_ptr<grpc::ChannelCredentials> creds,
                                           absl::Duration keepalive_time,
                                           absl::Duration keepalive_timeout) {
  grpc::ChannelArguments args;
  if (keepalive_time > absl::ZeroDuration()) {
    // TCP keepalive, not HTTP/2 pings: the server's kernel answers the probes, where each
    // ping cost the server ~15 us of CPU (6 % of a core for 4096 agents at 1 s).
    AddTcpKeepalive(TcpKeepalive{.probe_interval = keepalive_time,
                                 .timeout = keepalive_time +
                                            std::max(keepalive_timeout, absl::Milliseconds(100))},
                    &args);
  }
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 500);
  // A private subchannel pool: a fresh channel really dials again instead of sharing a
  // subchannel that is still backing off from an earlier failure.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(endpoint, std::move(creds), args);
}

absl::Status CheckBearerToken(const grpc::ServerContextBase& context, const std::string& token) {
  if (token.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "this rendezvous server requires a token (MUSTER_TOKEN or --token-file) and none was "
        "sent");
  }
  std::string_view value(it->second.data(), it->second.size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.substr(0, kBearer.size()) != kBearer ||
      !SameSecret(value.substr(kBearer.size()), token)) {
    return absl::UnauthenticatedError(
        "the rendezvous token does not match the server's (check MUSTER_TOKEN / --token-file)");
  }
  return absl::OkStatus();
}

void AddBearerToken(const std::string& token, grpc::ClientContext* context) {
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
}

}  // namespace muster::rdzv::grpc_internal
