// The agent's part of a preemption (issue 17 item 4, docs/guides/preemption.md): SIGTERM, a
// --preempt-file notice or `muster drain` make the job tell every agent before anything is
// stopped; each agent hands the notice to its workers (agent/preempt/preempt_notice.h) and waits
// up to --preempt-grace for them to exit on their own. The preempted node then leaves and
// exits 143; the others wait for the job's word (a next round without it, or the end).
#include <signal.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/lifecycle/agent.h"
#include "agent/preempt/preempt_notice.h"
#include "base/duration.h"
#include "base/exit_codes.h"
#include "base/status_macros.h"
#include "launch/exit_status.h"
#include "spdlog/spdlog.h"

namespace muster {

absl::Status Agent::WatchPreemptFile() {
  if (config_.preempt_file.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(preempt_watch_,
                   PreemptFileWatch::Start(loop_, config_.preempt_file,
                                           [this](const std::string& r) { OnPreemptFile(r); }));
  return absl::OkStatus();
}

void Agent::OnPreemptFile(const std::string& reason) {
  if (done() || agent_signal_ != 0) return;  // already stopping
  events_->Write("preempt_file", {{"path", config_.preempt_file}, {"reason", reason}});
  agent_signal_ = SIGTERM;  // a second notice (SIGTERM) kills, as a second signal does
  if (PreemptSelf(reason)) return;
  rdzv_->Leave(reason);
  const int code = exit_code::ForSignal(SIGTERM);
  ExitAfterStop(
      {.code = code, .summary = absl::StrCat("preempted (", reason, "); exiting ", code)});
}

bool Agent::PreemptSelf(const std::string& reason) {
  if (preempt_ && preempt_->round == round_ && phase_ == Phase::kPreempting) {
    if (!preempt_->self) {  // another node's notice runs: this one goes too, at its end
      preempt_->self = true;
      rdzv_->Preempt(reason);
      Publish();
    }
    return true;
  }
  if (phase_ != Phase::kRunning) return false;
  rdzv_->Preempt(reason);  // every node hears it (this one too: ignored, it is under way)
  BeginPreempt(/*self=*/true, hostname_, reason);
  return true;
}

void Agent::OnPreemptNotice(const rdzv::Event& e) {
  if (preempt_ && preempt_->round == round_) return;  // this round's is known
  const bool self = e.preempted_node == node_.node_id;
  if (phase_ == Phase::kRunning) return BeginPreempt(self, e.preempted_host, e.text);
  if (!self || agent_signal_ != 0) return;  // nothing of this node's runs: the job's word follows
  // `muster drain` while the workers are done or stopping: leave as SIGTERM would.
  agent_signal_ = SIGTERM;
  rdzv_->Leave(e.text);
  const int code = exit_code::ForSignal(SIGTERM);
  ExitAfterStop(
      {.code = code, .summary = absl::StrCat("preempted (", e.text, "); exiting ", code)});
}

void Agent::BeginPreempt(bool self, const std::string& host, const std::string& reason) {
  const absl::Time now = EventLoop::Now();
  const absl::Duration grace = std::min(config_.preempt_grace, config_.shutdown_timeout);
  phase_ = Phase::kPreempting;
  preempt_ =
      PreemptState{.round = round_, .self = self, .host = host, .reason = reason, .started = now};
  NoticeDelivery d = DeliverPreemptNotice(launcher_->Workers(), config_.preempt_signal, reason);
  spdlog::warn(
      "{} is being preempted ({}): notice given to {} of {} running workers{}; waiting up "
      "to {} for them to exit",
      self ? "this node" : absl::StrCat("node ", host), reason, d.listening, d.running,
      config_.preempt_signal == 0
          ? " (MUSTER_PREEMPTED only)"
          : absl::StrCat(" (", SignalName(config_.preempt_signal), " to those that catch it)"),
      HumanDuration(d.listening > 0 ? grace : absl::ZeroDuration()));
  events_->Write("preempt_notice", {{"self", self},
                                    {"host", host},
                                    {"reason", reason},
                                    {"running", d.running},
                                    {"listening", d.listening}});
  Publish();
  if (d.listening == 0 || AllWorkersEnded(launcher_->Workers())) {
    // As before the notice existed: SIGTERM at once, SIGKILL after --shutdown-timeout.
    return EndPreemptWait(absl::StrCat("no local worker listens for the notice (none catches ",
                                       SignalName(config_.preempt_signal), ")"));
  }
  preempt_->grace_timer = loop_->AddTimer(now + grace, [this, grace] {
    preempt_->grace_timer = 0;
    EndPreemptWait(absl::StrCat("the preempt grace of ", HumanDuration(grace), " is over"));
  });
}

void Agent::EndPreemptWait(const std::string& why) {
  if (!preempt_ || !preempt_->waiting) return;
  preempt_->waiting = false;
  if (preempt_->grace_timer != 0) loop_->CancelTimer(preempt_->grace_timer);
  preempt_->grace_timer = 0;
  const bool all_ended = AllWorkersEnded(launcher_->Workers());
  spdlog::info("preemption: {}{}", why, all_ended ? "" : "; stopping the workers still running");
  std::optional<rdzv::Event> held = std::move(preempt_->held);
  if (preempt_->self) {
    rdzv_->Leave(absl::StrCat("preempted: ", preempt_->reason));
    const int code = exit_code::ForSignal(SIGTERM);
    // The notice counts against the SIGTERM grace: SIGKILL comes --shutdown-timeout after it.
    const absl::Duration left = preempt_->started + config_.shutdown_timeout - EventLoop::Now();
    ExitAfterStop({.code = code,
                   .summary = absl::StrCat("preempted (", preempt_->reason, "); exiting ", code)},
                  left > absl::ZeroDuration() ? SIGTERM : SIGKILL);
    if (launcher_->stopping() && left > absl::ZeroDuration()) {
      preempt_->kill_timer = loop_->AddTimer(EventLoop::Now() + left, [this] {
        preempt_->kill_timer = 0;
        launcher_->Escalate();
      });
    }
    return;
  }
  phase_ = Phase::kPreempted;
  launcher_->Stop(SIGTERM);  // what the workers left behind, and any that ignored the notice
  Publish();
  if (held) OnRendezvousEvent(*held);
}

bool Agent::TakeWorkerExitWhilePreempting() {
  if (phase_ == Phase::kPreempted) return true;
  if (phase_ != Phase::kPreempting) return false;
  if (AllWorkersEnded(launcher_->Workers())) EndPreemptWait("every local worker exited");
  return true;
}

bool Agent::HoldWhilePreempting(const rdzv::Event& e) {
  if (e.kind != rdzv::Event::Kind::kStopWorkers && e.kind != rdzv::Event::Kind::kFinished) {
    return false;
  }
  if (phase_ == Phase::kPreempting) {
    // The workers are checkpointing: what the job decided waits until they are done.
    if (!preempt_->held || e.kind == rdzv::Event::Kind::kFinished) preempt_->held = e;
    return true;
  }
  if (phase_ == Phase::kPreempted && e.kind == rdzv::Event::Kind::kStopWorkers &&
      launcher_->stopping()) {
    last_stop_ = e;
    phase_ = Phase::kRestarting;  // reported stopped once the stop is done
    return true;
  }
  return false;
}

}  // namespace muster
