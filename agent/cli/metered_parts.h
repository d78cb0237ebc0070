// Metrics for `muster run --metrics-port` without code in the agent's state machine: the
// launcher and the rendezvous client are wrapped by ones that pass every call through and
// count what goes by (workers started and ended, rounds, restarts, the rendezvous's
// duration), and the agent's published phase reaches AgentMetrics through PhaseReporter.
// Everything runs on the agent's loop thread, as the wrapped parts do.
#ifndef MUSTER_AGENT_METERED_PARTS_H_
#define MUSTER_AGENT_METERED_PARTS_H_

#include <memory>

#include "agent/lifecycle/agent_parts.h"
#include "metrics/agent_metrics.h"
#include "metrics/metrics_server.h"

namespace muster {

// Owns the metrics server; the agent tells it each transition's phase.
class MetricsPhaseReporter : public PhaseReporter {
 public:
  MetricsPhaseReporter(std::unique_ptr<metrics::MetricsServer> server,
                       std::shared_ptr<metrics::AgentMetrics> metrics)
      : server_(std::move(server)), metrics_(std::move(metrics)) {}
  void SetPhase(AgentPhase phase) override { metrics_->SetPhase(phase); }

 private:
  std::unique_ptr<metrics::MetricsServer> server_;
  std::shared_ptr<metrics::AgentMetrics> metrics_;
};

// Wraps `parts`' launcher and rendezvous client so that they count into `metrics`.
void MeterParts(const std::shared_ptr<metrics::AgentMetrics>& metrics, AgentParts& parts);

}  // namespace muster

#endif  // MUSTER_AGENT_METERED_PARTS_H_
