#include "metrics/agent_metrics.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace muster::metrics {
namespace {

constexpr std::array<const char*, 4> kWorkerStates = {"running", "succeeded", "failed", "stopped"};

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

prometheus::MetricFamily GaugeFamily(const char* name, const char* help, double value) {
  prometheus::ClientMetric m;
  m.gauge.value = value;
  return prometheus::MetricFamily{
      .name = name, .help = help, .type = prometheus::MetricType::Gauge, .metric = {m}};
}

}  // namespace

std::string ExitCodeLabel(int code) {
  // 0 success, 1 a Python exception, 2 usage, 126 not executable, 127 not found; 128+N:
  // SIGHUP, SIGINT, SIGQUIT, SIGABRT, SIGBUS, SIGFPE, SIGKILL (the OOM killer, a
  // preemption), 138 (transient, docs/design.md §4.4, or SIGUSR1), SIGSEGV, SIGPIPE, SIGTERM.
  constexpr std::array<int, 16> kNamed = {0,   1,   2,   126, 127, 129, 130, 131,
                                          134, 135, 136, 137, 138, 139, 141, 143};
  if (std::find(kNamed.begin(), kNamed.end(), code) != kNamed.end()) return absl::StrCat(code);
  return code > 128 ? "other_signal" : "other";
}

// Values a scrape computes: the time since the last transition, the store's connections.
class AgentMetrics::ScrapeTimeValues : public prometheus::Collectable {
 public:
  ScrapeTimeValues(std::shared_ptr<std::atomic<int64_t>> transition_ns,
                   std::shared_ptr<std::atomic<int64_t>> store_connections)
      : transition_ns_(std::move(transition_ns)), store_(std::move(store_connections)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const double since = static_cast<double>(SteadyNowNs() - transition_ns_->load()) / 1e9;
    return {GaugeFamily("muster_agent_seconds_since_transition",
                        "Seconds since the agent's phase last changed.", since),
            GaugeFamily("muster_store_connections",
                        "Open connections to this agent's c10d store (group rank 0 serves it).",
                        static_cast<double>(store_->load()))};
  }

 private:
  std::shared_ptr<std::atomic<int64_t>> transition_ns_;
  std::shared_ptr<std::atomic<int64_t>> store_;
};

std::shared_ptr<AgentMetrics> AgentMetrics::Create(MetricsServer* server) {
  std::shared_ptr<AgentMetrics> m(new AgentMetrics(server));
  server->Add(std::make_shared<ScrapeTimeValues>(m->transition_ns_, m->store_connections_));
  return m;
}

AgentMetrics::AgentMetrics(MetricsServer* server) : registry_(server->registry()) {
  prometheus::Registry& r = *registry_;
  phases_ = &prometheus::BuildGauge()
                 .Name("muster_agent_phase")
                 .Help("1 for the phase the agent is in (as --status-file names it), 0 otherwise.")
                 .Register(r);
  for (AgentPhase p : kAgentPhases) phases_->Add({{"phase", AgentPhaseName(p)}});
  workers_ = &prometheus::BuildGauge()
                  .Name("muster_workers")
                  .Help("This node's workers of the current attempt, by state.")
                  .Register(r);
  for (const char* s : kWorkerStates) workers_->Add({{"state", s}});
  exits_ = &prometheus::BuildCounter()
                .Name("muster_worker_exits_total")
                .Help(
                    "Worker exits on this node by exit code (128+N: signal N; other, "
                    "other_signal: the rest) and whether the agent was stopping them.")
                .Register(r);
  restarts_ = &prometheus::BuildCounter()
                   .Name("muster_restarts_total")
                   .Help("Restarts of the job (its TORCHELASTIC_RESTART_COUNT).")
                   .Register(r)
                   .Add({});
  rounds_ = &prometheus::BuildCounter()
                 .Name("muster_rounds_total")
                 .Help("Rendezvous rounds this agent took part in.")
                 .Register(r)
                 .Add({});
  rendezvous_seconds_ =
      &prometheus::BuildHistogram()
           .Name("muster_rendezvous_round_duration_seconds")
           .Help("From joining (or reporting the workers stopped) to the round's start.")
           .Register(r)
           .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                                                            10, 30, 60, 120, 300, 600});
  straggler_rank_ = &prometheus::BuildGauge()
                         .Name("muster_straggler_rank")
                         .Help(
                             "The rank the job named a straggler (the others wait for it in "
                             "collectives), -1 while none is (docs/guides/hangs-and-stacks.md).")
                         .Register(r)
                         .Add({});
  straggler_rank_->Set(-1);
  straggler_share_ = &prometheus::BuildGauge()
                          .Name("muster_straggler_share")
                          .Help(
                              "The share of the window's samples in which the others waited "
                              "for the named straggler, 0 while none is.")
                          .Register(r)
                          .Add({});
  transition_ns_->store(SteadyNowNs());
}

void AgentMetrics::SetStraggler(int rank, double share) {
  straggler_rank_->Set(rank >= 0 ? rank : -1);
  straggler_share_->Set(rank >= 0 ? share : 0);
}

void AgentMetrics::SetPhase(AgentPhase phase) {
  if (phase_ == phase) return;
  if (phase_) phases_->Add({{"phase", AgentPhaseName(*phase_)}}).Set(0);
  phases_->Add({{"phase", AgentPhaseName(phase)}}).Set(1);
  phase_ = phase;
  transition_ns_->store(SteadyNowNs());
}

void AgentMetrics::RendezvousOpened() {
  rendezvous_opened_ = std::chrono::steady_clock::now();
  rendezvous_open_ = true;
}

void AgentMetrics::RoundStarted(int restart_count) {
  rounds_->Increment();
  if (restart_count > restart_count_) {
    restarts_->Increment(restart_count - restart_count_);
    restart_count_ = restart_count;
  }
  if (!rendezvous_open_) return;
  rendezvous_open_ = false;
  rendezvous_seconds_->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - rendezvous_opened_).count());
}

void AgentMetrics::WorkersStarted(int started) {
  for (const char* s : kWorkerStates) workers_->Add({{"state", s}}).Set(0);
  workers_->Add({{"state", "running"}}).Set(started);
}

void AgentMetrics::WorkerExited(int code, bool while_stopping, bool was_running) {
  if (was_running) workers_->Add({{"state", "running"}}).Decrement();
  const char* state = while_stopping ? "stopped" : code == 0 ? "succeeded" : "failed";
  workers_->Add({{"state", state}}).Increment();
  exits_->Add({{"code", ExitCodeLabel(code)}, {"while", while_stopping ? "stopping" : "running"}})
      .Increment();
}

}  // namespace muster::metrics
