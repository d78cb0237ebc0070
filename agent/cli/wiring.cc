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
#include "agent/cli/backends/rendezvous_backend.h"
#include "agent/cli/metered_parts.h"
#include "agent/config/listen_address.h"
#include "agent/diagnostics/local_stacks.h"
#include "agent/diagnostics/py_spy.h"
#include "agent/diagnostics/stack_collector.h"
#include "agent/diagnostics/straggler_watch.h"
#include "agent/diagnostics/trace_collection.h"
#include "agent/health/health_gate.h"
#include "agent/health/spare_phase.h"
#include "agent/lifecycle/agent.h"
#include "agent/lifecycle/exit_barrier.h"
#include "agent/lifecycle/lease_fence.h"
#include "agent/lifecycle/readiness.h"
#include "agent/lifecycle/status_file.h"
#include "agent/preempt/preemption.h"
#include "agent/workers/warm_start_gate.h"
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
#include "launch/warm_source.h"
#include "launch/worker_group.h"
#include "metrics/agent_metrics.h"
#include "metrics/metrics_server.h"
#include "rendezvous/grpc/health_server.h"
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

// --metrics-port: the server and the agent's metrics (a hosted rendezvous server adds its
// own: RendezvousBackend::Wire); all null without the flag.
struct AgentMetricsWiring {
  std::unique_ptr<metrics::MetricsServer> exposer;
  std::shared_ptr<metrics::AgentMetrics> agent;
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

// `muster stacks`: the collector reads the launcher's workers (the launcher outlives the
// client, which holds the collector).
// One collector answers both the rendezvous server and the node-local socket.
std::shared_ptr<StackCollector> StackCollectorFor(const RunPlan& plan, AgentParts& parts) {
  if (!parts.stack_collector) {
    const Config& config = plan.config;
    auto path = plan.workers.env_base.find("PATH");
    parts.stack_collector = std::make_shared<StackCollector>(
        parts.launcher.get(),
        StackCollector::Options{
            .hook = !config.no_stack_hook,
            .py_spy = FindPySpy(path != plan.workers.env_base.end() ? path->second : "")});
  }
  return parts.stack_collector;
}

// A job-wide `muster stacks` reaching this node through its rendezvous.
void AnswerStacksRequests(const RunPlan& plan, AgentParts& parts, RunWiring& run) {
  std::shared_ptr<StackCollector> collector = StackCollectorFor(plan, parts);
  run.on_stacks_request = [collector](absl::Duration timeout,
                                      std::function<void(std::vector<rdzv::RankStack>)> reply) {
    collector->Collect(timeout, std::move(reply));
  };
}

// `muster stacks` without --rdzv-endpoint, in every mode (agent/diagnostics/local_stacks.h).
// Without it (a name already taken) the job runs on: a warning says what is lost.
void ServeLocalStacks(const RunPlan& plan, AgentParts& parts) {
  std::shared_ptr<StackCollector> collector = StackCollectorFor(plan, parts);
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

// Where the workers come from: exec'd, or with --warm-start forked from a template that
// starts importing now, while the rendezvous forms (docs/design.md §4.5a). The template's
// environment is what every worker's starts from, with the variables the worker environment
// adds for all ranks alike and a module may read at import (agent/workers/worker_env.cc).
// With a template, `*gate` is the component that holds the first round until it is ready.
absl::StatusOr<std::unique_ptr<WorkerSource>> WorkerSourceFor(
    const RunPlan& plan, std::unique_ptr<AgentComponent>* gate) {
  const Config& config = plan.config;
  if (config.warm_start && config.no_python) {
    spdlog::info("warm start: --no-python workers are exec'd");
  }
  if (!config.warm_start || config.no_python) return std::make_unique<ExecSource>();
  std::map<std::string, std::string> env = plan.workers.env_base;
  if (!env.count("OMP_NUM_THREADS") && plan.workers.nproc > 1) env["OMP_NUM_THREADS"] = "1";
  if (!env.count("PYTHONUNBUFFERED")) env["PYTHONUNBUFFERED"] = "1";
  WarmSource::Options options{.python_exec = config.python_exec, .preload = config.preload};
  for (const auto& [name, value] : env) options.env.push_back(absl::StrCat(name, "=", value));
  ASSIGN_OR_RETURN(std::unique_ptr<WarmSource> warm, WarmSource::Create(std::move(options)));
  *gate = std::make_unique<WarmStartGate>(*warm);
  return warm;
}

absl::StatusOr<AgentParts> Wire(const RunPlan& plan, absl::StatusOr<ContainmentChoice> containment,
                                Supervisor supervisor, int* stop_signal,
                                std::unique_ptr<AgentComponent>* warm_gate) {
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
  ASSIGN_OR_RETURN(std::unique_ptr<WorkerSource> source, WorkerSourceFor(plan, warm_gate));
  ASSIGN_OR_RETURN(std::unique_ptr<WorkerGroup> group,
                   WorkerGroup::Create(parts.loop.get(), config.shutdown_timeout,
                                       *std::move(containment), std::move(source)));
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
  // The rendezvous: whatever carries it (agent/cli/backends/rendezvous_backend.h).
  RunWiring run{.plan = plan,
                .store_address = parts.store_address,
                .metrics_server = metered.exposer.get(),
                .store_connections = metered.store_connections(),
                .store_limits = StoreLimits(config)};
  AnswerStacksRequests(plan, parts, run);
  RETURN_IF_ERROR(BackendFor(plan.rendezvous.backend).Wire(run, parts));
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
  std::unique_ptr<AgentComponent> warm_gate;  // with --warm-start
  absl::StatusOr<AgentParts> parts =
      Wire(plan, std::move(containment), std::move(supervisor), &stop_signal, &warm_gate);
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
  HostedRendezvous* hosted = parts->hosted_rendezvous.get();  // the agent keeps it
  auto health_gate = std::make_unique<HealthGate>(plan.probe_report, plan.workers.env_base);
  std::unique_ptr<StragglerWatch> stragglers = StragglerWatch::ForConfig(plan.config);
  Agent agent(std::move(plan), *std::move(parts));
  // The features that observe the agent's events (agent/lifecycle/agent_component.h). The
  // warm gate first: the others see a round it holds once, when it is handed on.
  if (warm_gate) agent.Add(std::move(warm_gate));
  agent.Add(std::make_unique<Preemption>());
  agent.Add(std::make_unique<TraceCollection>(hosted));
  agent.Add(std::make_unique<LeaseFence>());
  agent.Add(std::make_unique<ExitBarrier>());
  agent.Add(std::move(health_gate));
  agent.Add(std::make_unique<SparePhase>());
  if (stragglers) agent.Add(std::move(stragglers));
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
