// muster's own rendezvous (rendezvous/grpc/): the client every agent holds, the server an
// agent hosts when the endpoint names its machine (or --rdzv-host true), and the JobStatus,
// Stacks and Drain calls of the query commands.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/cli/backends/rendezvous_backend.h"
#include "agent/cli/job_query.h"
#include "agent/config/listen_address.h"
#include "agent/config/rendezvous_flags.h"
#include "base/endpoint.h"
#include "base/status_macros.h"
#include "metrics/server_metrics.h"
#include "rendezvous/grpc/client.h"
#include "rendezvous/grpc/drain_client.h"
#include "rendezvous/grpc/job_status_client.h"
#include "rendezvous/grpc/server.h"
#include "rendezvous/grpc/stacks_client.h"
#include "rendezvous/shared_port/shared_port.h"
#include "rendezvous/shared_port/store_router.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

class HostedGrpcRendezvous : public HostedRendezvous {
 public:
  HostedGrpcRendezvous(std::unique_ptr<rdzv::RendezvousServer> server,
                       std::unique_ptr<shared_port::SharedPort> port,
                       std::shared_ptr<metrics::ServerMetrics> metrics)
      : server_(std::move(server)), port_(std::move(port)), metrics_(std::move(metrics)) {
    if (metrics_) metrics_->SetCounts([s = server_.get()] { return s->Counts(); });
  }
  ~HostedGrpcRendezvous() override {
    if (metrics_) metrics_->SetCounts(nullptr);  // before the server goes
  }
  bool WaitForAgentsToLeave(const std::string& except_node_id, absl::Duration timeout) override {
    return server_->WaitForAgentsToLeave(except_node_id, timeout);
  }
  void KeepTracesIn(const std::string& dir, const std::string& host) override {
    server_->KeepTracesIn(dir, /*per_job=*/false, host);
  }

 private:
  std::unique_ptr<rdzv::RendezvousServer> server_;
  std::unique_ptr<shared_port::SharedPort> port_;    // null with TLS; hands sockets to server_
  std::shared_ptr<metrics::ServerMetrics> metrics_;  // null without --metrics-port
};

// The embedded server on the endpoint's port. Without TLS the port is shared with the
// store (docs/design.md §4.3 "Ports"): the server listens on nothing itself, the SharedPort hands
// it the HTTP/2 connections and every other one to this agent's store of the round, which then
// reports the same port. With TLS, connections cannot be told apart before the handshake,
// so the server listens on the port itself and the store on a port of its own.
// Both listen on run.store_address only (agent/config/listen_address.h), as the store does.
absl::StatusOr<std::unique_ptr<HostedGrpcRendezvous>> StartHostedServer(const RunWiring& run,
                                                                        AgentParts& parts) {
  const Config& config = run.plan.config;
  const bool shared = config.tls_cert.empty();
  // Before the first join: a hosted server counts into it from the start.
  std::shared_ptr<metrics::ServerMetrics> metrics;
  if (run.metrics_server) metrics = metrics::ServerMetrics::Create(run.metrics_server);
  ASSIGN_OR_RETURN(
      std::unique_ptr<rdzv::RendezvousServer> server,
      rdzv::RendezvousServer::Start({
          .listen_address =
              shared ? "" : ListenEndpoint(run.store_address, run.plan.rendezvous.endpoint.port),
          .token = config.token,
          .tls_cert_file = config.tls_cert,
          .tls_key_file = config.tls_key,
          .run_id = run.plan.run_id,
          .heartbeat_interval = config.heartbeat_interval,
          .heartbeat_misses = config.heartbeat_misses,
          .observer = metrics,
      }));
  if (!shared) {
    return std::make_unique<HostedGrpcRendezvous>(std::move(server), nullptr, std::move(metrics));
  }
  auto router = std::make_shared<shared_port::StoreRouter>();
  rdzv::RendezvousServer* raw = server.get();
  ASSIGN_OR_RETURN(
      std::unique_ptr<shared_port::SharedPort> port,
      shared_port::SharedPort::Start({
          .bind_address = run.store_address,
          .port = static_cast<uint16_t>(run.plan.rendezvous.endpoint.port),
          .on_http2 = [raw](UniqueFd fd,
                            std::string peer) { raw->AdoptConnection(fd.release(), peer); },
          .on_store = [router](UniqueFd fd,
                               std::string peer) { router->Route(std::move(fd), std::move(peer)); },
      }));
  const uint16_t shared_port = port->port();
  parts.store_factory = [router, shared_port, gauge = run.store_connections,
                         limits = run.store_limits](int) {
    return shared_port::StoreRouter::StartStore(router, shared_port, gauge, limits);
  };
  parts.store_shares_rendezvous_port = true;
  return std::make_unique<HostedGrpcRendezvous>(std::move(server), std::move(port),
                                                std::move(metrics));
}

// The query commands' connection: --rdzv-endpoint, --rdzv-id and kJobQueryFlags.
absl::StatusOr<rdzv::JobStatusQuery> JobQueryFromFlags(const FlagValues& values) {
  rdzv::JobStatusQuery query;
  std::optional<FlagValue> endpoint = values.Get("rdzv-endpoint");
  if (!endpoint) {
    return absl::InvalidArgumentError(
        "--rdzv-endpoint: missing; give HOST[:PORT] of the rendezvous");
  }
  ASSIGN_OR_RETURN(query.endpoint,
                   ParseEndpoint(endpoint->where, endpoint->text, kDefaultRendezvousPort));
  if (auto id = values.Get("rdzv-id")) {
    ASSIGN_OR_RETURN(query.run_id, ParseRunId(*id));
  }
  ASSIGN_OR_RETURN(query.token, ResolveToken(values.Get("token-file"), values.env()));
  if (auto ca = values.Get("tls-ca")) query.tls_ca_file = ca->text;
  if (auto t = values.Get("timeout")) {
    ASSIGN_OR_RETURN(query.timeout, PositiveDuration(*t));
    query.wait_for_server = true;  // without --timeout, a refused connection fails at once
  }
  return query;
}

class GrpcJobQuery : public JobQuery {
 public:
  explicit GrpcJobQuery(rdzv::JobStatusQuery query) : query_(std::move(query)) {}
  const std::string& run_id() const override { return query_.run_id; }
  std::string Where() const override { return query_.endpoint.ToString(); }
  absl::StatusOr<std::vector<rdzv::JobSummary>> ListJobs() override {
    return rdzv::ListJobs(query_);
  }
  absl::StatusOr<rdzv::JobStatusSnapshot> Status() override { return rdzv::GetJobStatus(query_); }
  absl::Status Watch(
      const std::function<void(const rdzv::JobStatusSnapshot&)>& on_change) override {
    return rdzv::WatchJobStatus(query_, on_change);
  }
  absl::StatusOr<std::vector<rdzv::NodeStacks>> Stacks(absl::Duration collect) override {
    return rdzv::GetStacks(query_, collect);
  }
  absl::StatusOr<rdzv::NodeInfo> Drain(const std::string& node_id, const std::string& host,
                                       const std::string& reason) override {
    return rdzv::DrainNode(query_, node_id, host, reason);
  }

 private:
  const rdzv::JobStatusQuery query_;
};

class GrpcRendezvousBackend : public RendezvousBackend {
 public:
  // The gRPC client, plus the embedded server where the plan says this node hosts the
  // rendezvous (--rdzv-host, or the endpoint names this machine: RunPlan's one look).
  absl::Status Wire(const RunWiring& run, AgentParts& parts) const override {
    const Config& config = run.plan.config;
    const RendezvousPlan& rendezvous = run.plan.rendezvous;
    const std::string endpoint = rendezvous.endpoint.ToString();  // for the lines below
    if (rendezvous.hosts_here) {
      absl::StatusOr<std::unique_ptr<HostedGrpcRendezvous>> server = StartHostedServer(run, parts);
      if (server.ok()) {
        parts.hosted_rendezvous = *std::move(server);
      } else if (config.rdzv_hosting == RdzvHosting::kAlways ||
                 !absl::IsUnavailable(server.status())) {
        // The server's own code: a port in use (Unavailable) may be free after a restart; a
        // bad certificate (InvalidArgument) will not be, and is no sign of another server.
        return absl::Status(
            server.status().code(),
            absl::StrCat(config.rdzv_hosting == RdzvHosting::kAlways ? "--rdzv-host true: " : "",
                         "cannot serve the rendezvous on port ", rendezvous.endpoint.port, ": ",
                         server.status().message()));
      } else {
        // Another agent on this host already serves it (the usual case when several agents
        // share a machine): join that one.
        spdlog::info("rendezvous at {} is served by another process; joining it", endpoint);
      }
    } else if (config.rdzv_hosting == RdzvHosting::kNever && rendezvous.endpoint_is_this_host) {
      // Two agents on the endpoint's host: say which one serves, so a wait is no mystery.
      spdlog::info("rendezvous at {} is not served by this agent ({}); joining it", endpoint,
                   config.SourceOf("rdzv-host"));
    }
    ASSIGN_OR_RETURN(parts.rendezvous, rdzv::GrpcRendezvousClient::Create({
                                           .endpoint = rendezvous.endpoint,
                                           .token = config.token,
                                           .tls_ca_file = config.tls_ca,
                                           .loop = parts.loop.get(),
                                           .join_timeout = config.join_timeout,
                                           .on_stacks_request = run.on_stacks_request,
                                       }));
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<JobQuery>> Query(const FlagValues& values) const override {
    ASSIGN_OR_RETURN(rdzv::JobStatusQuery query, JobQueryFromFlags(values));
    return std::make_unique<GrpcJobQuery>(std::move(query));
  }
};

}  // namespace

const RendezvousBackend& GrpcBackend() {
  static const GrpcRendezvousBackend* const backend = new GrpcRendezvousBackend();
  return *backend;
}

}  // namespace muster
