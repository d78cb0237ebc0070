#include "agent/wiring.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/status_file.h"
#include "agent/this_host.h"
#include "base/endpoint.h"
#include "base/errno_status.h"
#include "base/exit_codes.h"
#include "base/log_format.h"
#include "base/random_id.h"
#include "base/status_macros.h"
#include "launch/console_log_sink.h"
#include "launch/containment.h"
#include "launch/kill_children.h"
#include "launch/process_tree.h"
#include "launch/signals.h"
#include "launch/supervisor.h"
#include "launch/worker_group.h"
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

class HostedGrpcRendezvous : public HostedRendezvous {
 public:
  HostedGrpcRendezvous(std::unique_ptr<rdzv::RendezvousServer> server,
                       std::unique_ptr<shared_port::SharedPort> port)
      : server_(std::move(server)), port_(std::move(port)) {}
  bool WaitForAgentsToLeave(const std::string& except_node_id, absl::Duration timeout) override {
    return server_->WaitForAgentsToLeave(except_node_id, timeout);
  }

 private:
  std::unique_ptr<rdzv::RendezvousServer> server_;
  std::unique_ptr<shared_port::SharedPort> port_;  // null with TLS; hands sockets to server_
};

// The embedded server on the endpoint's port. Without TLS the port is shared with the
// store (DESIGN §4.3 "Ports"): the server listens on nothing itself, the SharedPort hands it
// the HTTP/2 connections and every other one to this agent's store of the round, which then
// reports the same port. With TLS, connections cannot be told apart before the handshake,
// so the server listens on the port itself and the store on a port of its own.
absl::StatusOr<std::unique_ptr<HostedGrpcRendezvous>> StartHostedServer(const Config& config,
                                                                        AgentParts& parts) {
  const bool shared = config.tls_cert.empty();
  ASSIGN_OR_RETURN(std::unique_ptr<rdzv::RendezvousServer> server,
                   rdzv::RendezvousServer::Start({
                       .listen_address = shared ? "" : absl::StrCat("[::]:", config.rdzv_port),
                       .token = config.token,
                       .tls_cert_file = config.tls_cert,
                       .tls_key_file = config.tls_key,
                       .run_id = config.run_id,
                       .heartbeat_interval = config.heartbeat_interval,
                       .heartbeat_misses = config.heartbeat_misses,
                   }));
  if (!shared) return std::make_unique<HostedGrpcRendezvous>(std::move(server), nullptr);
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
  parts.store_factory = [router, shared_port](const std::string&, int) {
    return shared_port::StoreRouter::StartStore(router, shared_port);
  };
  parts.store_shares_rendezvous_port = true;
  return std::make_unique<HostedGrpcRendezvous>(std::move(server), std::move(port));
}

// --rdzv-endpoint given: the gRPC client, plus the embedded server when this node hosts
// the rendezvous.
absl::Status WireGrpcRendezvous(const Config& config, AgentParts& parts) {
  const std::string& host = config.rdzv_host_name;
  std::string endpoint = JoinHostPort(host, config.rdzv_port);
  bool host_here = config.rdzv_hosting == RdzvHosting::kAlways ||
                   (config.rdzv_hosting == RdzvHosting::kAuto && IsThisHost(host));
  if (host_here) {
    absl::StatusOr<std::unique_ptr<HostedGrpcRendezvous>> server = StartHostedServer(config, parts);
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

// The supervisor is gone (SIGKILLed: launch/supervisor.h). Nobody waits for this agent's
// exit code any more, and nothing of the job may outlive it: every process below the agent
// (workers, the orphans it adopted, the watchdog) is killed and reaped, then it exits.
absl::Status WatchSupervisor(EventLoop* loop, Supervisor supervisor, std::string termination_log) {
  auto fd = std::make_shared<UniqueFd>(std::move(supervisor.pidfd));
  return loop->Add(fd->get(), EPOLLIN, [fd, pid = supervisor.pid, termination_log](uint32_t) {
    const int code = exit_code::ForSignal(SIGKILL);
    std::string summary = absl::StrCat(
        "the supervisor (pid ", pid, ") is gone: killed every process of the job; exiting ", code);
    spdlog::error("the supervisor (pid {}) is gone: killing every process of the job", pid);
    if (!KillAndReapChildren(absl::Seconds(10))) {
      spdlog::error("some processes of the job did not die within 10 s of SIGKILL");
    }
    WriteTerminationLog(termination_log, summary);
    spdlog::error("{}", summary);
    FlushConsoleLog(absl::Seconds(1));
    _exit(code);
  });
}

absl::StatusOr<AgentParts> Wire(const Config& config, absl::StatusOr<ContainmentChoice> containment,
                                Supervisor supervisor) {
  AgentParts parts;
  // Order matters: signals are blocked before the watchdog forks and before any thread
  // starts (the console writer's, gRPC's), so none of them ever receives the job's signals.
  ASSIGN_OR_RETURN(parts.signal_fd, BlockAndOpenSignalFd(config.signals_to_handle));
  RETURN_IF_ERROR(BecomeSubreaper());
  ASSIGN_OR_RETURN(parts.loop, EventLoop::Create());
  if (!containment.ok()) return containment.status();
  if (supervisor.pidfd.valid()) {
    RETURN_IF_ERROR(
        WatchSupervisor(parts.loop.get(), std::move(supervisor), config.termination_log));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<WorkerGroup> group,
      WorkerGroup::Create(parts.loop.get(), config.shutdown_timeout, *std::move(containment)));
  // From here on a log line is queued, never written by the loop: a stuck console must
  // not keep signals, child exits and rendezvous events waiting (the watchdog has forked).
  LogThroughConsole(group->console());
  parts.launcher = std::move(group);
  if (config.rdzv_host_name.empty()) {
    parts.rendezvous = std::make_unique<rdzv::LocalRendezvous>(parts.loop.get());
  } else {
    RETURN_IF_ERROR(WireGrpcRendezvous(config, parts));
  }
  if (!parts.store_shares_rendezvous_port) {
    parts.store_factory = [](const std::string& bind_address, int port) {
      return c10d::StoreServer::Start(
          {.bind_address = bind_address, .port = static_cast<uint16_t>(port)});
    };
  }
  if (config.health_port >= 0) {
    ASSIGN_OR_RETURN(std::unique_ptr<rdzv::HealthServer> health,
                     rdzv::HealthServer::Start(absl::StrCat("[::]:", config.health_port)));
    parts.health = std::make_unique<GrpcHealthReporter>(std::move(health));
  }
  return parts;
}

int WireAndRun(Config config, absl::StatusOr<ContainmentChoice> containment,
               Supervisor supervisor) {
  if (config.standalone && config.run_id == "none") config.run_id = Uuid4();  // like torchrun
  absl::StatusOr<AgentParts> parts = Wire(config, std::move(containment), std::move(supervisor));
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
  // Chosen before anything else: in mode session (not PID 1) this process stays as the
  // supervisor and the agent is its child (launch/supervisor.h).
  absl::StatusOr<ContainmentChoice> containment = ChooseContainment(config.containment);
  Supervisor supervisor;
  if (containment.ok() && containment->supervised) {
    absl::StatusOr<Supervisor> s = SplitOffAgent(config.signals_to_handle);
    if (s.ok()) {
      supervisor = *std::move(s);
    } else {
      containment = s.status();  // reported as any set-up failure
    }
  }
  int code = WireAndRun(std::move(config), std::move(containment), std::move(supervisor));
  // The agent's last lines (its summary) are queued: out within 1 s, or lost on a stuck
  // console, which must not keep the agent from exiting.
  FlushConsoleLog(absl::Seconds(1));
  return code;
}

}  // namespace muster
