// The agent's part of a preemption: agent/preempt/preemption.h.
#include "agent/preempt/preemption.h"

#include <signal.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/preempt/preempt_notice.h"
#include "base/duration.h"
#include "base/exit_codes.h"
#include "base/status_macros.h"
#include "launch/exit_status.h"
#include "spdlog/spdlog.h"

namespace muster {

absl::Status Preemption::Start(AgentControl& agent) {
  agent_ = &agent;
  const std::string& path = agent.config().preempt_file;
  if (path.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(file_watch_,
                   PreemptFileWatch::Start(&agent.loop(), path,
                                           [this](const std::string& r) { OnPreemptFile(r); }));
  return absl::OkStatus();
}

bool Preemption::Waiting() const {
  return notice_ && notice_->waiting && notice_->round == agent_->round() &&
         agent_->phase() == LifecyclePhase::kRunning;
}

bool Preemption::OnSignal(int sig, bool first) {
  if (!first) {
    EndWait("a second signal");
    return false;  // the agent kills the workers
  }
  return sig == SIGTERM && PreemptSelf(absl::StrCat("agent received ", SignalName(sig)));
}

void Preemption::OnPreemptFile(const std::string& reason) {
  if (!agent_->ClaimStop(SIGTERM)) return;  // already stopping
  agent_->events().Write("preempt_file",
                         {{"path", agent_->config().preempt_file}, {"reason", reason}});
  if (PreemptSelf(reason)) return;
  agent_->rendezvous()->Leave(reason);
  const int code = exit_code::ForSignal(SIGTERM);
  agent_->ExitAfterStop(code, absl::StrCat("preempted (", reason, "); exiting ", code), SIGTERM);
}

bool Preemption::PreemptSelf(const std::string& reason) {
  if (Waiting()) {
    if (!notice_->self) {  // another node's notice runs: this one goes too, at its end
      notice_->self = true;
      agent_->rendezvous()->Preempt(reason);
      agent_->Publish();
    }
    return true;
  }
  if (agent_->phase() != LifecyclePhase::kRunning) return false;
  agent_->rendezvous()->Preempt(reason);  // every node hears it (this one too: ignored)
  Begin(/*self=*/true, agent_->node().host, reason);
  return true;
}

bool Preemption::OnWorkerExit(const WorkerExit& /*exit*/) {
  if (!Waiting()) return false;
  // The notice caused it: no restart decision.
  if (AllWorkersEnded(agent_->launcher().Workers())) EndWait("every local worker exited");
  return true;
}

bool Preemption::OnRendezvousEvent(const rdzv::Event& e) {
  switch (e.kind) {
    case rdzv::Event::Kind::kPreempt:
      OnNotice(e);
      return true;
    case rdzv::Event::Kind::kStopWorkers:
    case rdzv::Event::Kind::kFinished:
      if (!Waiting()) return false;
      // The workers are checkpointing: what the job decided waits until they are done.
      if (!notice_->held || e.kind == rdzv::Event::Kind::kFinished) notice_->held = e;
      return true;
    default:
      return false;
  }
}

void Preemption::OnNotice(const rdzv::Event& e) {
  if (notice_ && notice_->round == agent_->round()) return;  // this round's is known
  const bool self = e.preempted_node == agent_->node().node_id;
  if (agent_->phase() == LifecyclePhase::kRunning) return Begin(self, e.preempted_host, e.text);
  // Nothing of this node's runs: the job's word follows. `muster drain` of this node while
  // the workers are done or stopping: leave as SIGTERM would.
  if (!self || !agent_->ClaimStop(SIGTERM)) return;
  agent_->rendezvous()->Leave(e.text);
  const int code = exit_code::ForSignal(SIGTERM);
  agent_->ExitAfterStop(code, absl::StrCat("preempted (", e.text, "); exiting ", code), SIGTERM);
}

void Preemption::Begin(bool self, const std::string& host, const std::string& reason) {
  const Config& config = agent_->config();
  WorkerLauncher& launcher = agent_->launcher();
  const absl::Time now = EventLoop::Now();
  const absl::Duration grace = std::min(config.preempt_grace, config.shutdown_timeout);
  notice_ = Notice{
      .round = agent_->round(), .self = self, .host = host, .reason = reason, .started = now};
  NoticeDelivery d = DeliverPreemptNotice(launcher.Workers(), config.preempt_signal, reason);
  spdlog::warn(
      "{} is being preempted ({}): notice given to {} of {} running workers{}; waiting up "
      "to {} for them to exit",
      self ? "this node" : absl::StrCat("node ", host), reason, d.listening, d.running,
      config.preempt_signal == 0
          ? " (MUSTER_PREEMPTED only)"
          : absl::StrCat(" (", SignalName(config.preempt_signal), " to those that catch it)"),
      HumanDuration(d.listening > 0 ? grace : absl::ZeroDuration()));
  agent_->events().Write("preempt_notice", {{"self", self},
                                            {"host", host},
                                            {"reason", reason},
                                            {"running", d.running},
                                            {"listening", d.listening}});
  agent_->Publish();
  if (d.listening == 0 || AllWorkersEnded(launcher.Workers())) {
    // As before the notice existed: SIGTERM at once, SIGKILL after --shutdown-timeout.
    return EndWait(absl::StrCat("no local worker listens for the notice (none catches ",
                                SignalName(config.preempt_signal), ")"));
  }
  notice_->grace_timer = agent_->loop().AddTimer(now + grace, [this, grace] {
    notice_->grace_timer = 0;
    EndWait(absl::StrCat("the preempt grace of ", HumanDuration(grace), " is over"));
  });
}

void Preemption::EndWait(const std::string& why) {
  if (!notice_ || !notice_->waiting) return;
  notice_->waiting = false;
  if (notice_->grace_timer != 0) agent_->loop().CancelTimer(notice_->grace_timer);
  notice_->grace_timer = 0;
  WorkerLauncher& launcher = agent_->launcher();
  const bool all_ended = AllWorkersEnded(launcher.Workers());
  spdlog::info("preemption: {}{}", why, all_ended ? "" : "; stopping the workers still running");
  std::optional<rdzv::Event> held = std::move(notice_->held);
  if (notice_->self) {
    agent_->rendezvous()->Leave(absl::StrCat("preempted: ", notice_->reason));
    const int code = exit_code::ForSignal(SIGTERM);
    // The notice counts against the SIGTERM grace: SIGKILL comes --shutdown-timeout after it.
    const absl::Duration left =
        notice_->started + agent_->config().shutdown_timeout - EventLoop::Now();
    agent_->ExitAfterStop(code, absl::StrCat("preempted (", notice_->reason, "); exiting ", code),
                          left > absl::ZeroDuration() ? SIGTERM : SIGKILL);
    if (launcher.stopping() && left > absl::ZeroDuration()) {
      notice_->kill_timer = agent_->loop().AddTimer(EventLoop::Now() + left, [this] {
        notice_->kill_timer = 0;
        agent_->launcher().Escalate();
      });
    }
    return;
  }
  // What the workers left behind, and any that ignored the notice; then the job's word.
  agent_->StopWorkers(LifecyclePhase::kCleaningUp, SIGTERM);
  if (held) agent_->Deliver(*held);
}

void Preemption::Describe(PublishedState& state) const {
  if (!notice_ || notice_->round != agent_->round()) return;
  const LifecyclePhase phase = agent_->phase();
  // From the notice until the job's word: the wait, then (another node's notice) the stop
  // of what is left and the wait at the barrier.
  const bool shown =
      phase == LifecyclePhase::kRunning
          ? notice_->waiting
          : !notice_->self && !notice_->waiting &&
                (phase == LifecyclePhase::kCleaningUp || phase == LifecyclePhase::kAtBarrier);
  if (!shown) return;
  state.phase = AgentPhase::kPreempting;
  if (state.status != nullptr) {
    (*state.status)["preempting"] = {
        {"host", notice_->host}, {"reason", notice_->reason}, {"self", notice_->self}};
  }
}

}  // namespace muster
