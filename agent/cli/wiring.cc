#include "agent/cli/wiring.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/cli/metered_parts.h"
#include "agent/config/etcd_security_flags.h"
#include "agent/config/listen_address.h"
#include "agent/diagnostics/local_stacks.h"
#include "agent/diagnostics/py_spy.h"
#include "agent/diagnostics/stack_collector.h"
#include "agent/lifecycle/agent.h"
#include "agent/lifecycle/readiness.h"
#include "agent/lifecycle/status_file.h"
#include "base/endpoint.h"
#include "base/errno_status.h"
#include "base/exit_codes.h"
#include "base/log_format.h"
#include "base/status_macros.h"
#include "launch/console_log_sink.h"
#include "launch/containment.h"
#include "launch/exit_status.h"
#include "launch/kill_children.h"
#include "launch/process_tree.h"
#include "launch/signals.h"
#include "launch/supervisor.h"
#include "launch/worker_group.h"
#include "metrics/agent_metrics.h"
#include "metrics/metrics_server.h"
#include "metrics/server_metrics.h"
#include "rendezvous/etcd/etcd_rendezvous.h"
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
  GrpcHealthReporter(std::unique_ptr<rdzv::HealthServer> server, bool hosts_rendezvous)
      : server_(std::move(server)), readiness_(hosts_rendezvous) {}
  void Report(AgentPhase phase) override {
    Readiness::Health health = readiness_.Next(phase);
    server_->SetReady(health.ready);
    server_->SetWorkersRunning(health.workers_running);
  }

 private:
  std::unique_ptr<rdzv::HealthServer> server_;
  Readiness readiness_;
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

// The store's limits: c10d::Limits' with --store-max-bytes.
c10d::Limits StoreLimits(const Config& config) {
  c10d::Limits limits;
  if (config.store_max_bytes) limits.max_store_bytes = *config.store_max_bytes;
  return limits;
}

absl::StatusOr<AgentMetricsWiring> StartMetrics(const Config& config, const ListenWaitFn& wait) {
  AgentMetricsWiring m;
  if (config.metrics_port < 0) return m;
  // The health port's address (agent/config/listen_address.h): one rule for both side listeners.
  ASSIGN_OR_RETURN(std::string address, ListenAddressFor(config, ListenPurpose::kNode, wait));
  ASSIGN_OR_RETURN(m.exposer, metrics::MetricsServer::Start(
                                  ListenEndpoint(address, config.metrics_port), "--metrics-port"));
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
// Both listen on `address` only (agent/config/listen_address.h), as the store does.
absl::StatusOr<std::unique_ptr<HostedGrpcRendezvous>> StartHostedServer(const RunPlan& plan,
                                                                        const std::string& address,
                                                                        AgentMetricsWiring& metered,
                                                                        AgentParts& parts) {
  const Config& config = plan.config;
  const bool shared = config.tls_cert.empty();
  if (metered.exposer && !metered.server) {
    metered.server = metrics::ServerMetrics::Create(metered.exposer.get());
  }
  ASSIGN_OR_RETURN(std::unique_ptr<rdzv::RendezvousServer> server,
                   rdzv::RendezvousServer::Start({
                       .listen_address = shared ? "" : ListenEndpoint(address, config.rdzv_port),
                       .token = config.token,
                       .tls_cert_file = config.tls_cert,
                       .tls_key_file = config.tls_key,
                       .run_id = plan.run_id,
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
          .bind_address = address,
          .port = static_cast<uint16_t>(config.rdzv_port),
          .on_http2 = [raw](UniqueFd fd,
                            std::string peer) { raw->AdoptConnection(fd.release(), peer); },
          .on_store = [router](UniqueFd fd,
                               std::string peer) { router->Route(std::move(fd), std::move(peer)); },
      }));
  const uint16_t shared_port = port->port();
  parts.store_factory = [router, shared_port, gauge = metered.store_connections(),
                         limits = StoreLimits(config)](int) {
    return shared_port::StoreRouter::StartStore(router, shared_port, gauge, limits);
  };
  parts.store_shares_rendezvous_port = true;
  return std::make_unique<HostedGrpcRendezvous>(std::move(server), std::move(port), metered.server);
}

// `muster stacks`: the collector reads the launcher's workers (the launcher outlives the
// client, which holds the collector).
// One collector answers both the rendezvous server and the node-local socket.
std::shared_ptr<StackCollector> StackCollectorFor(const Config& config, AgentParts& parts) {
  if (!parts.stack_collector) {
    auto path = config.worker_env_base.find("PATH");
    parts.stack_collector = std::make_shared<StackCollector>(
        parts.launcher.get(),
        StackCollector::Options{
            .hook = !config.no_stack_hook,
            .py_spy = FindPySpy(path != config.worker_env_base.end() ? path->second : "")});
  }
  return parts.stack_collector;
}

rdzv::GrpcRendezvousClient::StacksHandler StacksHandler(const Config& config, AgentParts& parts) {
  std::shared_ptr<StackCollector> collector = StackCollectorFor(config, parts);
  return [collector](absl::Duration timeout, rdzv::GrpcRendezvousClient::StacksReply reply) {
    collector->Collect(timeout, std::move(reply));
  };
}

// `muster stacks` without --rdzv-endpoint, in every mode (agent/diagnostics/local_stacks.h).
// Without it (a name already taken) the job runs on: a warning says what is lost.
void ServeLocalStacks(const RunPlan& plan, AgentParts& parts) {
  std::shared_ptr<StackCollector> collector = StackCollectorFor(plan.config, parts);
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;  // the answer names no host
  absl::StatusOr<std::unique_ptr<LocalStacksServer>> local =
      LocalStacksServer::Start(parts.loop.get(), plan.run_id, host,
                               [collector](absl::Duration timeout, LocalStacksServer::Reply reply) {
                                 collector->Collect(timeout, std::move(reply));
                               });
  if (!local.ok()) {
    spdlog::warn("`muster stacks` on this node will not reach this agent: {}",
                 local.status().message());
    return;
  }
  parts.local_stacks = *std::move(local);
}

// --rdzv-endpoint given: the gRPC client, plus the embedded server when this node hosts
// the rendezvous (on `store_address`).
absl::Status WireGrpcRendezvous(const RunPlan& plan, const std::string& store_address,
                                AgentMetricsWiring& metered, AgentParts& parts) {
  const Config& config = plan.config;
  const std::string endpoint = plan.rendezvous.endpoint.ToString();
  if (plan.rendezvous.hosts_here) {
    absl::StatusOr<std::unique_ptr<HostedGrpcRendezvous>> server =
        StartHostedServer(plan, store_address, metered, parts);
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
  } else if (config.rdzv_hosting == RdzvHosting::kNever && plan.rendezvous.endpoint_is_this_host) {
    // Two agents on the endpoint's host: say which one serves, so a wait is no mystery.
    spdlog::info("rendezvous at {} is not served by this agent ({}); joining it", endpoint,
                 config.SourceOf("rdzv-host"));
  }
  ASSIGN_OR_RETURN(parts.rendezvous, rdzv::GrpcRendezvousClient::Create({
                                         .endpoint = endpoint,
                                         .token = config.token,
                                         .tls_ca_file = config.tls_ca,
                                         .loop = parts.loop.get(),
                                         .join_timeout = config.join_timeout,
                                         .on_stacks_request = StacksHandler(config, parts),
                                     }));
  return absl::OkStatus();
}

// Sleeps up to `d` on the agent's signalfd (no loop reads it yet); false when a signal to
// stop arrives, recorded in *stop_signal. A SIGCHLD read here (the watchdog, an orphan) is
// raised again for the loop.
bool SleepUnlessSignalled(int signal_fd, absl::Duration d, int* stop_signal) {
  const absl::Time until = absl::Now() + d;
  bool child = false;
  for (absl::Duration left = d; left > absl::ZeroDuration(); left = until - absl::Now()) {
    pollfd p{.fd = signal_fd, .events = POLLIN, .revents = 0};
    int n = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (n < 0 && errno == EINTR) continue;  // a stop signal is blocked; this is another
    if (n < 0) spdlog::warn("poll on the signalfd: {}", strerror(errno));
    if (n <= 0) break;  // the time is up (or poll failed: the caller's deadline still holds)
    signalfd_siginfo info;
    if (read(signal_fd, &info, sizeof(info)) != sizeof(info)) continue;  // EAGAIN: none left
    if (info.ssi_signo != SIGCHLD) {
      *stop_signal = static_cast<int>(info.ssi_signo);
      break;
    }
    child = true;
  }
  if (child && kill(getpid(), SIGCHLD) != 0) spdlog::warn("kill(SIGCHLD): {}", strerror(errno));
  return *stop_signal == 0;
}

// The store's address, where one is needed: on an agent that may serve the store (or the
// rendezvous, which shares its port).
absl::Status WireListenAddresses(const RunPlan& plan, const ListenWaitFn& wait,
                                 std::shared_ptr<std::atomic<int64_t>> store_connections,
                                 AgentParts& parts) {
  const Config& config = plan.config;
  const bool opens_store = plan.rendezvous.opens_store;
  const bool hosts_here = plan.rendezvous.hosts_here;
  if (!config.local_addr.empty()) {  // checked even where nothing listens on it
    RETURN_IF_ERROR(LocalAddressOf(config.SourceOf("local-addr"), config.local_addr).status());
  }
  if (opens_store || hosts_here) {
    ASSIGN_OR_RETURN(parts.store_address, ListenAddressFor(config, ListenPurpose::kStore, wait));
  }
  if (hosts_here) {
    RETURN_IF_ERROR(CheckServedEndpoint(config, parts.store_address));
  }
  if (opens_store) {
    parts.store_factory = [address = parts.store_address, gauge = std::move(store_connections),
                           limits = StoreLimits(config)](int port) {
      return c10d::StoreServer::Start({.bind_address = address,
                                       .port = static_cast<uint16_t>(port),
                                       .limits = limits,
                                       .connection_gauge = gauge});
    };
  }
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
    std::vector<pid_t> stuck;
    if (!KillAndReapChildren(absl::Seconds(10), &stuck)) {
      spdlog::error("processes of the job not reaped within 10 s of SIGKILL: {}",
                    stuck.empty() ? "unknown (/proc is not mounted)" : absl::StrJoin(stuck, ", "));
    }
    WriteTerminationLog(termination_log, summary);
    spdlog::error("{}", summary);
    FlushConsoleLog(absl::Seconds(1));
    _exit(code);
  });
}

// --rdzv-backend etcd: no agent serves the rendezvous; each serves its own store. Without
// --local-addr / POD_IP the node's address is the store's: the local address of the route
// toward the first etcd member (ListenAddressFor), as with gRPC's rendezvous.
absl::Status WireEtcdRendezvous(const Config& config, AgentParts& parts) {
  ASSIGN_OR_RETURN(parts.rendezvous, rdzv::etcd::EtcdRendezvousClient::Create({
                                         .endpoints = config.rdzv_endpoints,
                                         .prefix = config.etcd_prefix,
                                         .loop = parts.loop.get(),
                                         .join_timeout = config.join_timeout,
                                         .security = EtcdSecurityOf(config.etcd_access),
                                         .on_stacks_request = StacksHandler(config, parts),
                                     }));
  return absl::OkStatus();
}

absl::StatusOr<AgentParts> Wire(const RunPlan& plan, absl::StatusOr<ContainmentChoice> containment,
                                Supervisor supervisor, int* stop_signal) {
  const Config& config = plan.config;
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
  ListenWaitFn wait = [fd = parts.signal_fd.get(), stop_signal](absl::Duration d) {
    return SleepUnlessSignalled(fd, d, stop_signal);
  };
  // Before the rendezvous: a hosted server counts into it from its first join.
  ASSIGN_OR_RETURN(AgentMetricsWiring metered, StartMetrics(config, wait));
  RETURN_IF_ERROR(WireListenAddresses(plan, wait, metered.store_connections(), parts));
  switch (plan.rendezvous.backend) {
    case rdzv::Backend::kInProcess:
      parts.rendezvous = std::make_unique<rdzv::LocalRendezvous>(parts.loop.get());
      break;
    case rdzv::Backend::kEtcd:
      RETURN_IF_ERROR(WireEtcdRendezvous(config, parts));
      break;
    case rdzv::Backend::kGrpc:
      RETURN_IF_ERROR(WireGrpcRendezvous(plan, parts.store_address, metered, parts));
      break;
  }
  ServeLocalStacks(plan, parts);
  if (config.health_port >= 0) {
    ASSIGN_OR_RETURN(std::string address, ListenAddressFor(config, ListenPurpose::kNode, wait));
    ASSIGN_OR_RETURN(std::unique_ptr<rdzv::HealthServer> health,
                     rdzv::HealthServer::Start(ListenEndpoint(address, config.health_port)));
    // The hosted server listens by now: the host is ready (agent/lifecycle/readiness.h).
    parts.health =
        std::make_unique<GrpcHealthReporter>(std::move(health), parts.hosted_rendezvous != nullptr);
  }
  if (metered.agent) {
    MeterParts(metered.agent, parts);
    parts.metrics =
        std::make_unique<MetricsPhaseReporter>(std::move(metered.exposer), metered.agent);
  }
  return parts;
}

int WireAndRun(RunPlan plan, absl::StatusOr<ContainmentChoice> containment, Supervisor supervisor) {
  int stop_signal = 0;
  absl::StatusOr<AgentParts> parts =
      Wire(plan, std::move(containment), std::move(supervisor), &stop_signal);
  if (!parts.ok()) {
    int code =
        stop_signal != 0 ? exit_code::ForSignal(stop_signal) : exit_code::ForStatus(parts.status());
    std::string summary =
        stop_signal != 0
            ? absl::StrCat("stopped by ", SignalName(stop_signal), " during setup; exiting ", code)
            : absl::StrCat("agent setup failed: ", parts.status().message(), "; exiting ", code);
    WriteTerminationLog(plan.config.termination_log, summary);
    spdlog::error("{}", summary);
    return code;
  }
  Agent agent(std::move(plan), *std::move(parts));
  return agent.Run();
}

}  // namespace

int RunAgent(RunPlan plan) {
  const Config& config = plan.config;
  // Chosen before anything else: in mode session (not PID 1) this process stays as the
  // supervisor and the agent is its child (launch/supervisor.h).
  absl::StatusOr<ContainmentChoice> containment =
      ChooseContainment(config.containment, config.allow_cgroup_escape);
  Supervisor supervisor;
  if (containment.ok() && containment->supervised) {
    absl::StatusOr<Supervisor> s = SplitOffAgent(config.signals_to_handle);
    if (s.ok()) {
      supervisor = *std::move(s);
    } else {
      containment = s.status();  // reported as any set-up failure
    }
  }
  int code = WireAndRun(std::move(plan), std::move(containment), std::move(supervisor));
  // The agent's last lines (its summary) are queued: out within 1 s, or lost on a stuck
  // console, which must not keep the agent from exiting.
  FlushConsoleLog(absl::Seconds(1));
  return code;
}

}  // namespace muster
