// Job (job.h): hang detection's job-wide part (hang.h). A node reports when none of its
// workers has used CPU for the hang timeout, with its ranks' stacks; once every participant
// of the round has, the round fails as "hung" and JudgeHang names the culprit.
#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"
#include "rendezvous/core/job.h"

namespace muster::rdzv {

void Job::NodeStalled(const std::string& node_id, int round, const Stall& stall, absl::Time now,
                      std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || phase_ != Phase::kRunning || round != round_) return;
  Touch(it->second, now);
  if (!stall.stalled) {
    it->second.stall.reset();
    return;
  }
  it->second.stall = stall;
  std::vector<NodeStacks> stacks;
  for (size_t i = 0; i < participants_.size(); ++i) {
    const Node& n = nodes_.at(participants_[i].node_id);
    if (n.succeeded) continue;  // its workers exited 0: waiting at the exit barrier
    if (!n.stall) return;       // a node still makes progress: slow, not hung
    stacks.push_back(NodeStacks{.node_id = n.info.node_id,
                                .host = n.info.host,
                                .group_rank = static_cast<int>(i),
                                .ranks = n.stall->ranks});
  }
  HangVerdict v = JudgeHang(stacks);
  Node& culprit = nodes_.count(v.node_id) ? nodes_.at(v.node_id) : it->second;
  culprit.failed = true;
  EndWorker(culprit, v.local_rank, v.pid, WorkerState::kFailed, 0, 0, "hung");
  // A hang is the agents' decision to restart or not (--hang-action); 138 says "worth a
  // restart" to whatever runs the agents, 1 says it is not.
  const bool restartable = stall.restartable;
  Failure f{.kind = FailureKind::kHung,
            .node_id = culprit.info.node_id,
            .host = culprit.info.host,
            .rank = v.rank,
            .local_rank = v.local_rank,
            .pid = v.pid,
            .code = restartable ? exit_code::kTransient : 1,
            .what = "hung",
            .message = v.line,
            .stderr_tail = v.groups,
            .restartable = restartable};
  FailRound("Hung", f, now, out);
}

}  // namespace muster::rdzv
