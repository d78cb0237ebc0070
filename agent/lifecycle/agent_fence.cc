// The agent's hard fence (docs/operations/liveness-and-partitions.md "etcd backend: the lease and
// the fence"): an agent cut off from etcd learns, with the rendezvous error, the earliest moment
// etcd may drop its lease and key (rendezvous/rendezvous_error.h); from then on the other nodes may
// start a round on this node's ranks. The workers got SIGTERM with the error; whatever is left of
// them at that moment gets SIGKILL, however long --shutdown-timeout is (a checkpoint in a SIGTERM
// handler would otherwise run on beside the survivors' new round: a split brain).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/lifecycle/agent.h"
#include "base/duration.h"
#include "spdlog/spdlog.h"

namespace muster {

void Agent::FenceAtKillBy(absl::Time kill_by) {
  if (fence_armed_) return;
  fence_armed_ = true;
  const absl::Duration left = kill_by - absl::Now();  // wall time, as the keeper's
  if (left <= absl::ZeroDuration()) return KillAtFence();
  spdlog::info("the workers get SIGKILL in {} at the latest, at the lease's end",
               HumanDuration(left));
  loop_->AddTimer(EventLoop::Now() + left, [this] { KillAtFence(); });
}

void Agent::KillAtFence() {
  if (!launcher_->stopping()) return;  // every worker has ended
  std::vector<std::string> left;
  for (const WorkerView& w : launcher_->Workers()) {
    if (w.pid != 0 && !w.status) {
      left.push_back(absl::StrCat("rank ", w.placement.rank, " (pid ", w.pid, ")"));
    }
  }
  const std::string what = left.empty() ? "what the workers left" : absl::StrJoin(left, ", ");
  spdlog::error("killed {} at the lease's end: the survivors may start without this node", what);
  events_->Write("fence_kill", {{"killed", what}});
  launcher_->Escalate();
}

}  // namespace muster
