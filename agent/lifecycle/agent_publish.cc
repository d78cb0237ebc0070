// What the agent tells others about itself: the phase and workers in --status-file, the
// health service and metrics, and the restart decision in the event log.
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/lifecycle/agent.h"
#include "agent/lifecycle/failure_report.h"
#include "base/agent_phase.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// What the agent tells others of its state machine's phase.
AgentPhase PublishedPhase(Agent::Phase phase) {
  switch (phase) {
    case Agent::Phase::kInit:
    case Agent::Phase::kRendezvous:
      return AgentPhase::kRendezvous;
    case Agent::Phase::kRunning:
    case Agent::Phase::kDebug:
      return AgentPhase::kRunning;
    case Agent::Phase::kCleaningUp:
    case Agent::Phase::kAtBarrier:
    case Agent::Phase::kRestarting:
    case Agent::Phase::kExiting:
      return AgentPhase::kStopping;
    case Agent::Phase::kSucceeded:
      return AgentPhase::kSucceeded;
    case Agent::Phase::kFailed:
      return AgentPhase::kFailed;
  }
  return AgentPhase::kFailed;
}

}  // namespace

void Agent::LogRestart(const rdzv::Assignment& a) {
  if (a.restart_count <= restart_count_) {
    if (a.round > 1) {
      spdlog::info("round {}: re-formed with {} nodes, no restart used", a.round,
                   a.group_world_size);
    }
    return;
  }
  spdlog::info("restarting all {} local workers: attempt {} ({} of {} restarts used)",
               plan_.workers.nproc, a.restart_count, a.restart_count, config_.max_restarts);
  nlohmann::json fields = {{"attempt", a.restart_count},
                           {"round", a.round},
                           {"restarts_used", a.restart_count},
                           {"max_restarts", config_.max_restarts}};
  if (last_stop_) {
    fields["reason"] = last_stop_->text;
    if (last_stop_->failure) {
      fields["rank"] = last_stop_->failure->rank;
      fields["code"] = last_stop_->failure->code;
      fields["host"] = last_stop_->failure->host;
    }
  }
  events_->Write("restart_decided", fields);
}

const rdzv::Failure* Agent::HangShown() const {
  if (phase_ == Phase::kRunning) return nullptr;  // a new round runs: the hang is history
  const rdzv::Failure* f = nullptr;
  if (outcome_ && outcome_->root_cause) {
    f = &*outcome_->root_cause;
  } else if (last_stop_ && last_stop_->failure) {
    f = &*last_stop_->failure;
  }
  return f != nullptr && f->kind == rdzv::FailureKind::kHung ? f : nullptr;
}

void Agent::Publish() {
  // The document lists every worker and is published on every worker's exit: O(K^2) for K
  // workers, which slowed spawning at K=256 (B7) with nobody reading it.
  nlohmann::json doc;
  PublishedState state{.phase = PublishedPhase(phase_),
                       .status = status_file_->enabled() ? &doc : nullptr};
  if (state.status != nullptr) FillStatus(doc);
  for (const std::unique_ptr<AgentComponent>& c : components_) c->Describe(state);
  if (parts_.health) parts_.health->Report(state.phase);
  if (parts_.metrics) parts_.metrics->SetPhase(state.phase);
  if (state.status == nullptr) return;
  doc["phase"] = AgentPhaseName(state.phase);
  status_file_->Write(doc);
}

void Agent::FillStatus(nlohmann::json& doc) const {
  doc = {{"run_id", plan_.run_id},
         {"node_id", node_.node_id},
         {"host", hostname_},
         {"round", round_},
         {"restart_count", restart_count_},
         {"max_restarts", config_.max_restarts},
         {"time", absl::FormatTime(absl::Now())},
         {"containment", launcher_->containment()},
         {"workers", nlohmann::json::array()}};
  if (assignment_) {
    doc["group_rank"] = assignment_->group_rank;
    doc["group_world_size"] = assignment_->group_world_size;
    doc["world_size"] = assignment_->world_size;
    doc["master"] = absl::StrCat(assignment_->master_addr, ":", assignment_->master_port);
  }
  for (const WorkerView& w : launcher_->Workers()) {
    nlohmann::json worker = {{"rank", w.placement.rank},
                             {"local_rank", w.placement.local_rank},
                             {"pid", w.pid},
                             {"start", WorkerStartName(w.start)},
                             {"state", w.status ? "exited" : "running"}};
    if (!w.fallback.empty()) worker["fallback"] = w.fallback;
    if (w.status) worker["code"] = w.status->code();
    doc["workers"].push_back(worker);
  }
  if (!plan_.probe_report.is_null()) doc["probe"] = plan_.probe_report;
  if (const rdzv::Failure* hang = HangShown()) {  // as `muster status`' conditions say
    doc["hung"] = {{"reason", "Hung"}, {"message", hang->message}, {"rank", hang->rank}};
  }
  if (outcome_) {
    doc["exit_code"] = outcome_->exit_code;
    doc["reason"] = outcome_->reason;
    if (outcome_->root_cause) doc["root_cause"] = FailureJson(*outcome_->root_cause);
  }
}

}  // namespace muster
