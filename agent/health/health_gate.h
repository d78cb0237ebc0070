// HealthGate: the health gate before every round (docs/design.md §3 "Health gate",
// docs/guides/health-gate.md). Before the agent joins the job, and before it reports a
// round's workers stopped, the gate runs the node's checks (agent/health/health_checks.h:
// free space in the run directory, muster-probe's GPU inventory and stale processes once
// a round has run, the user's --health-check). A node that fails joins all the same, marked
// excluded with the reason (rdzv::NodeInfo::excluded): the job counts it toward no round
// and lists it as Excluded, the agent publishes the phase Excluded (status file, health
// service, muster_agent_phase) and writes a `health_check` event. While excluded the gate
// checks again on a backoff (HealthBackoff) and, once healthy, tells the job, which takes
// the node into a round as it would a joiner. While the job says the node is a hot spare
// (rdzv::Event::spare, docs/guides/spares.md) the gate checks it every
// --spare-check-interval as well: a spare that turns sick while it waits is kept out the same
// way (listed Excluded, not taken into a round) and is a spare again once a check passes.
// When the job quarantines the node for the
// rest of the job (the bad-node memory, docs/guides/health-gate.md "Bad-node memory"), the
// gate says so once (log, `node_quarantined` event, the status file's `health.quarantined`),
// keeps the phase Excluded and checks no more: no verdict of its own can bring it back.
//
// The checks run on the agent's loop thread, each within its deadline (the user's
// command within --health-check-timeout): between rounds the node has no workers to
// watch, and a helper child run beside the loop would lose its exit status to the loop's
// reaper (launch/reaper.h). A signal that arrives meanwhile is handled when they end.
#ifndef MUSTER_AGENT_HEALTH_HEALTH_GATE_H_
#define MUSTER_AGENT_HEALTH_HEALTH_GATE_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/health/health_backoff.h"
#include "agent/lifecycle/agent_component.h"
#include "base/event_loop.h"
#include "nlohmann/json.hpp"

namespace muster {

class HealthGate : public AgentComponent {
 public:
  // `probe_report`: the GPU probe's at the agent's start (RunPlan::probe_report; null when
  // it did not run). With GPUs found there, the gate probes again between rounds.
  // `env`: the environment the checks run in, the workers' (WorkerPlan::env_base).
  HealthGate(const nlohmann::json& probe_report, std::map<std::string, std::string> env);
  ~HealthGate() override;
  HealthGate(const HealthGate&) = delete;
  HealthGate& operator=(const HealthGate&) = delete;

  absl::Status Start(AgentControl& agent) override;
  void BeforeJoin(rdzv::NodeInfo& node, bool first) override;
  bool OnRendezvousEvent(const rdzv::Event& event) override;
  void Describe(PublishedState& state) const override;

 private:
  // Every check in turn, the first failure's reason; "" when the node is healthy.
  // `first`: before the first join (the GPU probe has just run at the agent's start).
  std::string Check(bool first);
  // Keeps the verdict, logs and records it, and while it excludes the node arms the next
  // check (CheckSchedule: the backoff, or a spare's interval). True when it changed.
  bool Record(const std::string& excluded, absl::Duration took);
  void Recheck();
  // The next check after `wait` (none: nullopt), instead of the one armed.
  void Arm(std::optional<absl::Duration> wait);
  void CancelRecheck();

  AgentControl* agent_ = nullptr;
  const std::map<std::string, std::string> env_;
  std::string probe_binary_;  // muster-probe, when it ran at the agent's start
  int expected_gpus_ = 0;     // what it found then
  std::string excluded_;      // the last verdict: "" healthy
  std::string quarantined_;   // why the job quarantined the node; "" when it did not
  int checks_ = 0;
  int checked_round_ = -1;  // the round whose stop BeforeJoin last checked (0: the join)
  CheckSchedule schedule_{absl::ZeroDuration()};  // Start gives --spare-check-interval
  EventLoop::TimerId recheck_ = 0;
};

}  // namespace muster

#endif  // MUSTER_AGENT_HEALTH_HEALTH_GATE_H_
