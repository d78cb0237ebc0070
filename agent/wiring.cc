#include "agent/wiring.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/metered_parts.h"
#include "agent/status_file.h"
#include "agent/this_host.h"
#include "base/endpoint.h"
#include "base/errno_status.h"
#include "base/exit_codes.h"
#include "base/log_format.h"
#include "base/random_id.h"
#include "base/status_macros.h"
#include "launch/console_log_sink.h"
#include "launch/process_tree.h"
#include "launch/signals.h"
#include "launch/worker_group.h"
#include "metrics/agent_metrics.h"
#include "metrics/metrics_server.h"
#include "metrics/server_metrics.h"
#include "rendezvous/grpc/client.h"
#include "rendezvous/grpc/health_server.h"
#include "rendezvous/grpc/server.h"
#include "rendezvous/local_client.h"
#include "rendezvous/shared_port/shared_port.h"
#include "rendezvous/shared_port/store_router.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

class GrpcHealthReporter : public HealthReporter {
 public:
  explicit GrpcHealthReporter(std::unique_ptr<rdzv::HealthServer> server)
      : server_(std::move(server)) {}
  void SetServing(bool serving) override { server_->SetServing(serving); }

 private:
  std::unique_ptr<rdzv::HealthServer> server_;
};

// --metrics-port: the server and the agent's metrics, plus the rendezvous server's once
// this agent hosts it (StartHostedServer); all null without the flag.
struct AgentMetricsWiring {
  std::unique_ptr<metrics::MetricsServer> exposer;
  std::shared_ptr<metrics::AgentMetrics> agent;
  std::shared_ptr<metrics::ServerMetrics> server;
  std::shared_ptr<std::atomic<int64_t>> store_connections() const {
    return agent ? agent->store_connections() : nullptr;
  }
};

absl::StatusOr<AgentMetricsWiring> StartMetrics(const Config& config) {
  AgentMetricsWiring m;
  if (config.metrics_port < 0) return m;
  ASSIGN_OR_RETURN(m.exposer, metrics::MetricsServer::Start(
                                  ListenAddressFor(config, config.metrics_port), "--metrics-port"));
  m.agent = metrics::AgentMetrics::Create(m.exposer.get());
  return m;
}

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

 private:
  std::unique_ptr<rdzv::RendezvousServer> server_;
  std::unique_ptr<shared_port::SharedPort> port_;    // null with TLS; hands sockets to server_
  std::shared_ptr<metrics::ServerMetrics> metrics_;  // null without --metrics-port
};

// The embedded server on the endpoint's port. Without TLS the port is shared with the
// store (DESIGN §4.3 "Ports"): the server listens on nothing itself, the SharedPort hands it
// the HTTP/2 connections and every other one to this agent's store of the round, which then
// reports the same port. With TLS, connections cannot be told apart before the handshake,
// so the server listens on the port itself and the store on a port of its own.
absl::StatusOr<std::unique_ptr<HostedGrpcRendezvous>> StartHostedServer(const Config& config,
                                                                        AgentMetricsWiring& metered,
                                                                        AgentParts& parts) {
  const bool shared = config.tls_cert.empty();
  if (metered.exposer && !metered.server) {
    metered.server = metrics::ServerMetrics::Create(metered.exposer.get());
  }
  ASSIGN_OR_RETURN(std::unique_ptr<rdzv::RendezvousServer> server,
                   rdzv::RendezvousServer::Start({
                       .listen_address = shared ? "" : absl::StrCat("[::]:", config.rdzv_port),
                       .token = config.token,
                       .tls_cert_file = config.tls_cert,
                       .tls_key_file = config.tls_key,
                       .run_id = config.run_id,
                       .heartbeat_interval = config.heartbeat_interval,
                       .heartbeat_misses = config.heartbeat_misses,
                       .observer = metered.server,
                   }));
  if (!shared) {
    return std::make_unique<HostedGrpcRendezvous>(std::move(server), nullptr, metered.server);
  }
  auto router = std::make_shared<shared_port::StoreRouter>();
  rdzv::RendezvousServer* raw = server.get();
  ASSIGN_OR_RETURN(
      std::unique_ptr<shared_port::SharedPort> port,
      shared_port::SharedPort::Start({
          .port = static_cast<uint16_t>(config.rdzv_port),
          .on_http2 = [raw](UniqueFd fd,
                            std::string peer) { raw->AdoptConnection(fd.release(), peer); },
          .on_store = [router](UniqueFd fd,
                               std::string peer) { router->Route(std::move(fd), std::move(peer)); },
      }));
  const uint16_t shared_port = port->port();
  parts.store_factory = [router, shared_port, gauge = metered.store_connections()](
                            const std::string&, int) {
    return shared_port::StoreRouter::StartStore(router, shared_port, gauge);
  };
  parts.store_shares_rendezvous_port = true;
  return std::make_unique<HostedGrpcRendezvous>(std::move(server), std::move(port), metered.server);
}

// --rdzv-endpoint given: the gRPC client, plus the embedded server when this node hosts
// the rendezvous.
absl::Status WireGrpcRendezvous(const Config& config, AgentMetricsWiring& metered,
                                AgentParts& parts) {
  const std::string& host = config.rdzv_host_name;
  std::string endpoint = JoinHostPort(host, config.rdzv_port);
  bool host_here = config.rdzv_hosting == RdzvHosting::kAlways ||
                   (config.rdzv_hosting == RdzvHosting::kAuto && IsThisHost(host));
  if (host_here) {
    absl::StatusOr<std::unique_ptr<HostedGrpcRendezvous>> server =
        StartHostedServer(config, metered, parts);
    if (!server.ok()) metered.server.reset();  // serves nothing: no server metrics
    if (server.ok()) {
      parts.hosted_rendezvous = *std::move(server);
    } else if (config.rdzv_hosting == RdzvHosting::kAlways ||
               !absl::IsUnavailable(server.status())) {
      // The server's own code: a port in use (Unavailable) may be free after a restart; a bad
      // certificate (InvalidArgument) will not be, and is no sign of another server.
      return absl::Status(
          server.status().code(),
          absl::StrCat(config.rdzv_hosting == RdzvHosting::kAlways ? "--rdzv-host true: " : "",
                       "cannot serve the rendezvous on port ", config.rdzv_port, ": ",
                       server.status().message()));
    } else {
      // Another agent on this host already serves it (the usual case when several agents
      // share a machine): join that one.
      spdlog::info("rendezvous at {} is served by another process; joining it", endpoint);
    }
  }
  ASSIGN_OR_RETURN(parts.rendezvous, rdzv::GrpcRendezvousClient::Create({
                                         .endpoint = endpoint,
                                         .token = config.token,
                                         .tls_ca_file = config.tls_ca,
                                         .loop = parts.loop.get(),
                                         .join_timeout = config.join_timeout,
                                     }));
  return absl::OkStatus();
}

absl::StatusOr<AgentParts> Wire(const Config& config) {
  AgentParts parts;
  // Order matters: signals are blocked before the watchdog forks and before any thread
  // starts (the console writer's, gRPC's), so none of them ever receives the job's signals.
  ASSIGN_OR_RETURN(parts.signal_fd, BlockAndOpenSignalFd(config.signals_to_handle));
  RETURN_IF_ERROR(BecomeSubreaper());
  ASSIGN_OR_RETURN(parts.loop, EventLoop::Create());
  ASSIGN_OR_RETURN(
      std::unique_ptr<WorkerGroup> group,
      WorkerGroup::Create(parts.loop.get(), config.shutdown_timeout, config.containment));
  // From here on a log line is queued, never written by the loop: a stuck console must
  // not keep signals, child exits and rendezvous events waiting (the watchdog has forked).
  LogThroughConsole(group->console());
  parts.launcher = std::move(group);
  // Before the rendezvous: a hosted server counts into it from its first join.
  ASSIGN_OR_RETURN(AgentMetricsWiring metered, StartMetrics(config));
  if (config.rdzv_host_name.empty()) {
    parts.rendezvous = std::make_unique<rdzv::LocalRendezvous>(parts.loop.get());
  } else {
    RETURN_IF_ERROR(WireGrpcRendezvous(config, metered, parts));
  }
  if (!parts.store_shares_rendezvous_port) {
    parts.store_factory = [gauge = metered.store_connections()](const std::string& bind_address,
                                                                int port) {
      return c10d::StoreServer::Start({.bind_address = bind_address,
                                       .port = static_cast<uint16_t>(port),
                                       .connection_gauge = gauge});
    };
  }
  if (config.health_port >= 0) {
    ASSIGN_OR_RETURN(std::unique_ptr<rdzv::HealthServer> health,
                     rdzv::HealthServer::Start(ListenAddressFor(config, config.health_port)));
    parts.health = std::make_unique<GrpcHealthReporter>(std::move(health));
  }
  if (metered.agent) {
    MeterParts(metered.agent, parts);
    parts.metrics =
        std::make_unique<MetricsPhaseReporter>(std::move(metered.exposer), metered.agent);
  }
  return parts;
}

int WireAndRun(Config config) {
  if (config.standalone && config.run_id == "none") config.run_id = Uuid4();  // like torchrun
  absl::StatusOr<AgentParts> parts = Wire(config);
  if (!parts.ok()) {
    int code = exit_code::ForStatus(parts.status());
    std::string summary =
        absl::StrCat("agent setup failed: ", parts.status().message(), "; exiting ", code);
    WriteTerminationLog(config.termination_log, summary);
    spdlog::error("{}", summary);
    return code;
  }
  Agent agent(std::move(config), *std::move(parts));
  return agent.Run();
}

}  // namespace

int RunAgent(Config config) {
  int code = WireAndRun(std::move(config));
  // The agent's last lines (its summary) are queued: out within 1 s, or lost on a stuck
  // console, which must not keep the agent from exiting.
  FlushConsoleLog(absl::Seconds(1));
  return code;
}

}  // namespace muster
