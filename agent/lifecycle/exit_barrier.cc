// The bound on the exit barrier: agent/lifecycle/exit_barrier.h.
#include "agent/lifecycle/exit_barrier.h"

#include <signal.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "base/duration.h"
#include "base/exit_codes.h"
#include "spdlog/spdlog.h"

namespace muster {

ExitBarrier::~ExitBarrier() { Disarm(); }

absl::Status ExitBarrier::Start(AgentControl& agent) {
  agent_ = &agent;
  return absl::OkStatus();
}

bool ExitBarrier::OnWorkerExit(const WorkerExit& exit) {
  const Config& config = agent_->config();
  WorkerLauncher& launcher = agent_->launcher();
  // The arrival is the agent's own test (agent/lifecycle/agent.cc OnWorkerExit): the last
  // worker of a running attempt exited 0.
  if (config.exit_barrier_timeout == absl::ZeroDuration() || config.debug || timer_ != 0 ||
      exit.while_stopping || exit.code != 0 || !launcher.running() || !launcher.AllSucceeded()) {
    return false;
  }
  timer_ = agent_->loop().AddTimer(EventLoop::Now() + config.exit_barrier_timeout, [this] {
    timer_ = 0;
    Expire();
  });
  return false;  // the agent reports the success and waits as always
}

bool ExitBarrier::OnRendezvousEvent(const rdzv::Event& event) {
  switch (event.kind) {
    case rdzv::Event::Kind::kRoundStarted:
    case rdzv::Event::Kind::kStopWorkers:
    case rdzv::Event::Kind::kFinished:
      Disarm();  // the job's word came
      break;
    default:
      break;
  }
  return false;
}

void ExitBarrier::Disarm() {
  if (timer_ != 0) agent_->loop().CancelTimer(timer_);
  timer_ = 0;
}

void ExitBarrier::Expire() {
  const LifecyclePhase phase = agent_->phase();
  if (phase != LifecyclePhase::kCleaningUp && phase != LifecyclePhase::kAtBarrier) return;
  const std::string why =
      absl::StrCat("exit barrier: this node's workers exited 0 ",
                   HumanDuration(agent_->config().exit_barrier_timeout),
                   " ago and the rest of the job has not finished (--exit-barrier-timeout)");
  spdlog::error("{}; leaving the job", why);
  agent_->events().Write(
      "exit_barrier_timeout",
      {{"timeout_s", absl::ToDoubleSeconds(agent_->config().exit_barrier_timeout)}});
  if (rdzv::RendezvousClient* rendezvous = agent_->rendezvous()) rendezvous->Leave(why);
  agent_->ExitAfterStop(exit_code::kTransient,
                        absl::StrCat(why, "; left the job, exiting ", exit_code::kTransient),
                        SIGTERM);
}

}  // namespace muster
