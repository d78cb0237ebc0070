#include "agent/health/health_gate.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/diagnostics/gpu_probe.h"
#include "agent/health/health_checks.h"
#include "base/duration.h"
#include "spdlog/spdlog.h"

namespace muster {

HealthGate::~HealthGate() { CancelRecheck(); }

HealthGate::HealthGate(const nlohmann::json& probe_report, std::map<std::string, std::string> env)
    : env_(std::move(env)) {
  // The probe ran at the agent's start (docs/design.md §4.9) and found GPUs: the gate
  // looks again between rounds.
  if (!probe_report.is_object()) return;
  auto count = probe_report.find("gpu_count");
  if (count != probe_report.end() && count->is_number_integer() && count->get<int>() > 0) {
    expected_gpus_ = count->get<int>();
    probe_binary_ = FindProbeBinary();
  }
}

absl::Status HealthGate::Start(AgentControl& agent) {
  agent_ = &agent;
  schedule_ = CheckSchedule(agent.config().spare_check_interval);
  return absl::OkStatus();
}

std::string HealthGate::Check(bool first) {
  const Config& c = agent_->config();
  const std::string& dir = agent_->run_dir().empty() ? c.log_dir : agent_->run_dir();
  std::string why = CheckFreeSpace(dir, c.health_min_free_bytes);
  if (why.empty() && !first) {
    why = CheckGpus(probe_binary_, expected_gpus_, c.probe_timeout, env_);
  }
  if (why.empty() && !c.health_check.empty()) {
    CommandVerdict v = RunHealthCommand(c.health_check, c.health_check_timeout, env_);
    why = std::move(v.excluded);
    if (!why.empty() && !v.output.empty()) {
      absl::StripTrailingAsciiWhitespace(&v.output);
      spdlog::warn("--health-check output:\n{}", v.output);
    }
  }
  return why;
}

bool HealthGate::Record(const std::string& excluded, absl::Duration took) {
  ++checks_;
  const bool changed = excluded != excluded_;
  excluded_ = excluded;
  const bool spare = schedule_.spare();
  const std::optional<absl::Duration> next = schedule_.Checked(excluded.empty());
  nlohmann::json fields = {{"healthy", excluded.empty()},
                           {"round", agent_->round()},
                           {"took_s", absl::ToDoubleSeconds(took)}};
  if (spare) fields["spare"] = true;
  if (excluded.empty()) {
    if (changed) {
      spdlog::info("health gate: the node is healthy again; it rejoins the rounds");
    } else if (spare) {
      spdlog::debug("health gate: the spare passed its check in {}; next in {}",
                    HumanDuration(took), HumanDuration(*next));
    }
  } else if (changed && spare) {
    // docs/guides/spares.md "Starting spares": the check runs while the spare waits.
    spdlog::warn(
        "health gate: the spare failed its check while it waited: {}; it is listed Excluded "
        "and no round takes it in until a check passes (fix what the check names, or stop "
        "this agent and start a spare on a healthy node); checking again in {}",
        excluded, HumanDuration(*next));
  } else if (changed) {
    spdlog::warn("health gate: the node sits out the rounds: {}; checking again in {}", excluded,
                 HumanDuration(*next));
  } else {
    spdlog::info("health gate: still unhealthy ({} checks): {}; next in {}", schedule_.failures(),
                 excluded, HumanDuration(*next));
  }
  if (!excluded.empty()) fields["reason"] = excluded;
  if (next.has_value()) fields["next_check_s"] = absl::ToDoubleSeconds(*next);
  Arm(next);
  agent_->events().Write("health_check", std::move(fields));
  return changed;
}

void HealthGate::BeforeJoin(rdzv::NodeInfo& node, bool first) {
  // A stop reported again for the same round (the agent stopped its workers before the
  // job's word, which then asks once more) keeps the verdict of the first report.
  if (!first && checked_round_ == agent_->round()) {
    node.excluded = excluded_;
    return;
  }
  checked_round_ = agent_->round();
  CancelRecheck();
  const absl::Time start = absl::Now();
  const std::string verdict = Check(first);
  const bool changed = Record(verdict, absl::Now() - start);
  node.excluded = excluded_;
  if (first) return;  // the join carries it
  if (changed && agent_->rendezvous() != nullptr) agent_->rendezvous()->ReportHealth(excluded_);
  agent_->Publish();
}

bool HealthGate::OnRendezvousEvent(const rdzv::Event& event) {
  if (!quarantined_.empty()) return false;
  // The job's word on spares, as SparePhase reads it (agent/health/spare_phase.h): a healthy
  // spare is checked while it waits, a round that takes it in ends that.
  bool spare = schedule_.spare();
  if (event.kind == rdzv::Event::Kind::kProgress) spare = event.spare;
  if (event.kind == rdzv::Event::Kind::kRoundStarted) spare = false;
  std::optional<absl::Duration> wait;
  if (schedule_.SpareChanged(spare, &wait)) Arm(wait);
  if (event.kind != rdzv::Event::Kind::kProgress || event.quarantined.empty()) return false;
  quarantined_ = event.quarantined;
  CancelRecheck();  // out for good: no check of its own can bring it back
  spdlog::warn(
      "health gate: the job {}; this agent stays without workers and exits with the "
      "job's outcome",
      quarantined_);
  agent_->events().Write("node_quarantined", {{"reason", quarantined_}});
  agent_->Publish();
  return false;  // the agent logs the job's word as for any progress
}

void HealthGate::Recheck() {
  recheck_ = 0;
  if (!quarantined_.empty()) return;
  // Only a node that waits out of rounds (kept out, or a spare) checks again: the job may
  // have ended meanwhile.
  if (agent_->phase() != LifecyclePhase::kRendezvous || agent_->outcome() != nullptr ||
      agent_->rendezvous() == nullptr) {
    return;
  }
  const absl::Time start = absl::Now();
  const std::string verdict = Check(/*first=*/false);
  if (Record(verdict, absl::Now() - start)) {
    agent_->rendezvous()->ReportHealth(excluded_);
  }
  agent_->Publish();
}

void HealthGate::Arm(std::optional<absl::Duration> wait) {
  CancelRecheck();
  if (!wait.has_value()) return;
  recheck_ = agent_->loop().AddTimer(EventLoop::Now() + *wait, [this] { Recheck(); });
}

void HealthGate::CancelRecheck() {
  if (recheck_ == 0) return;
  agent_->loop().CancelTimer(recheck_);
  recheck_ = 0;
}

void HealthGate::Describe(PublishedState& state) const {
  if (checks_ == 0 && quarantined_.empty()) return;
  if ((!excluded_.empty() || !quarantined_.empty()) &&
      agent_->phase() == LifecyclePhase::kRendezvous) {
    state.phase = AgentPhase::kExcluded;
  }
  if (state.status != nullptr) {
    (*state.status)["health"] = {{"healthy", excluded_.empty()}, {"checks", checks_}};
    if (!excluded_.empty()) (*state.status)["health"]["excluded"] = excluded_;
    if (!quarantined_.empty()) (*state.status)["health"]["quarantined"] = quarantined_;
  }
}

}  // namespace muster
