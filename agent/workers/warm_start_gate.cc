// The wait for the warm template's imports on the agent's loop: agent/workers/warm_start_gate.h.
#include "agent/workers/warm_start_gate.h"

#include <sys/epoll.h>

#include <utility>

#include "spdlog/spdlog.h"

namespace muster {

WarmStartGate::~WarmStartGate() { StopWatching(); }

absl::Status WarmStartGate::Start(AgentControl& agent) {
  agent_ = &agent;
  const int fd = source_.importing_fd();
  if (fd < 0) {
    open_ = true;  // nothing to wait for (ready already, or no template)
    return absl::OkStatus();
  }
  // Readable: "ready", or EOF when the template exited (a failed import).
  absl::Status watched = agent.loop().Add(fd, EPOLLIN, [this](uint32_t) { Open(); });
  if (!watched.ok()) return watched;
  watched_fd_ = fd;
  deadline_timer_ = agent.loop().AddTimer(source_.import_deadline(), [this] {
    deadline_timer_ = 0;
    Open();
  });
  return absl::OkStatus();
}

bool WarmStartGate::OnRendezvousEvent(const rdzv::Event& event) {
  if (open_) return false;
  if (event.kind == rdzv::Event::Kind::kRoundStarted && held_.empty()) {
    spdlog::info(
        "warm start: round {} formed; its workers start once the template has "
        "imported its modules",
        event.assignment.round);
  }
  // Nothing of the job runs yet; what the job says after the round (a stop, its end) must
  // reach the agent after the round it refers to, so everything waits in order.
  if (event.kind == rdzv::Event::Kind::kRoundStarted || !held_.empty()) {
    held_.push_back(event);
    return true;
  }
  return false;
}

void WarmStartGate::Open() {
  StopWatching();  // before CheckReady, which may close the fd (a retired template)
  source_.CheckReady();
  open_ = true;
  std::vector<rdzv::Event> held = std::move(held_);
  held_.clear();
  for (const rdzv::Event& event : held) agent_->Deliver(event);
}

void WarmStartGate::StopWatching() {
  if (agent_ == nullptr) return;
  if (watched_fd_ >= 0) agent_->loop().Remove(watched_fd_);
  watched_fd_ = -1;
  if (deadline_timer_ != 0) agent_->loop().CancelTimer(deadline_timer_);
  deadline_timer_ = 0;
}

}  // namespace muster
