// AgentMetrics: what one agent reports on --metrics-port (docs/reference/metrics.md), all under the
// muster_ prefix, with bounded labels only (no pid, no rank):
//   muster_agent_phase{phase}                       1 for the phase the agent is in
//   muster_agent_seconds_since_transition           since the last phase change
//   muster_workers{state}                           this node's workers of the attempt
//   muster_worker_exits_total{code,while}           code: ExitCodeLabel; while: running|stopping
//   muster_restarts_total                           the job's restarts (TORCHELASTIC_RESTART_COUNT)
//   muster_rounds_total                             rounds this agent took part in
//   muster_rendezvous_round_duration_seconds        joining (or reporting stopped) -> round start
//   muster_store_connections                        open connections to this agent's c10d store
//   muster_straggler_rank                           the rank the job named a straggler, -1: none
//   muster_straggler_share                          the share of samples the others waited for it
//
// Updated from the agent's loop thread: counters and gauges are atomics, the histogram
// takes its own short lock; nothing waits for a scrape or does I/O. Values computed at a
// scrape (time since the transition, store connections) are read from atomics.
// Thread-safe.
#ifndef MUSTER_METRICS_AGENT_METRICS_H_
#define MUSTER_METRICS_AGENT_METRICS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/agent_phase.h"
#include "metrics/metrics_server.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace muster::metrics {

// The `code` label of a worker's exit: the number for the codes that mean something of
// their own (0, 1, 2, 126, 127, 128+N for the usual signals N), "other" for another exit
// code below 128, "other_signal" for another 128+N. At most 18 values.
std::string ExitCodeLabel(int code);

class AgentMetrics {
 public:
  // Registers the agent's families in `server`'s registry.
  static std::shared_ptr<AgentMetrics> Create(MetricsServer* server);

  // The agent's phase; a transition when it differs from the last one.
  void SetPhase(AgentPhase phase);
  // The agent joined, or reported its workers stopped: a round is being formed.
  void RendezvousOpened();
  // A round started; `restart_count` is the job's (it never goes down).
  void RoundStarted(int restart_count);
  // The attempt's workers: `started` running (the previous attempt's are forgotten).
  void WorkersStarted(int started);
  // The job named a straggler (rank >= 0, the share of samples), or none (rank -1).
  void SetStraggler(int rank, double share);
  // `was_running`: it had a process (one that could not be made was never running).
  void WorkerExited(int code, bool while_stopping, bool was_running);
  // Shared with every round's store (c10d::StoreServer::Options::connection_gauge).
  const std::shared_ptr<std::atomic<int64_t>>& store_connections() const {
    return store_connections_;
  }

 private:
  class ScrapeTimeValues;
  explicit AgentMetrics(MetricsServer* server);

  std::shared_ptr<prometheus::Registry> registry_;  // keeps the families below alive
  prometheus::Family<prometheus::Gauge>* phases_;
  prometheus::Family<prometheus::Gauge>* workers_;
  prometheus::Family<prometheus::Counter>* exits_;
  prometheus::Counter* restarts_;
  prometheus::Counter* rounds_;
  prometheus::Histogram* rendezvous_seconds_;
  prometheus::Gauge* straggler_rank_;
  prometheus::Gauge* straggler_share_;
  std::optional<AgentPhase> phase_;  // loop thread only
  int restart_count_ = 0;            // loop thread only
  std::chrono::steady_clock::time_point rendezvous_opened_;
  bool rendezvous_open_ = false;
  // steady_clock nanoseconds at the last phase change (read by scrapes).
  std::shared_ptr<std::atomic<int64_t>> transition_ns_ = std::make_shared<std::atomic<int64_t>>(0);
  std::shared_ptr<std::atomic<int64_t>> store_connections_ =
      std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace muster::metrics

#endif  // MUSTER_METRICS_AGENT_METRICS_H_
