// The agent's hard fence: agent/lifecycle/lease_fence.h.
#include "agent/lifecycle/lease_fence.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/duration.h"
#include "spdlog/spdlog.h"

namespace muster {

void LeaseFence::OnRendezvousError(const rdzv::RendezvousError& error) {
  if (error.kill_by) KillAt(*error.kill_by);
}

void LeaseFence::KillAt(absl::Time kill_by) {
  if (armed_) return;
  armed_ = true;
  const absl::Duration left = kill_by - absl::Now();  // wall time, as the keeper's
  if (left <= absl::ZeroDuration()) return Kill();
  spdlog::info("the workers get SIGKILL in {} at the latest, at the lease's end",
               HumanDuration(left));
  agent_->loop().AddTimer(EventLoop::Now() + left, [this] { Kill(); });
}

void LeaseFence::Kill() {
  WorkerLauncher& launcher = agent_->launcher();
  if (!launcher.stopping()) return;  // every worker has ended
  std::vector<std::string> left;
  for (const WorkerView& w : launcher.Workers()) {
    if (w.pid != 0 && !w.status) {
      left.push_back(absl::StrCat("rank ", w.placement.rank, " (pid ", w.pid, ")"));
    }
  }
  const std::string what = left.empty() ? "what the workers left" : absl::StrJoin(left, ", ");
  spdlog::error("killed {} at the lease's end: the survivors may start without this node", what);
  agent_->events().Write("fence_kill", {{"killed", what}});
  launcher.Escalate();
}

}  // namespace muster
