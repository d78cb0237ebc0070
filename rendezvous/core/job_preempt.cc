// Job (job.h): preemption notices (issue 17 item 4, docs/guides/preemption.md). The notice goes
// to every live node before anything is stopped; the preempted node leaves afterwards and
// its loss is then handled as any other (job.cc's RemoveNode, with SIGTERM's code).
#include <signal.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"
#include "rendezvous/core/job.h"

namespace muster::rdzv {

absl::Status Job::Preempt(const std::string& node_id, const std::string& reason, absl::Time now,
                          std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.left) {
    return absl::NotFoundError(absl::StrCat("node ", node_id, " is not in job ", spec_.run_id));
  }
  if (phase_ != Phase::kRunning || !IsParticipant(node_id)) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", it->second.info.host, " runs no workers of job ", spec_.run_id,
                     " now (the job is between rounds or finished): nothing to preempt"));
  }
  const bool known = std::any_of(preempting_.begin(), preempting_.end(),
                                 [&](const Preemption& p) { return p.node_id == node_id; });
  if (known) return absl::OkStatus();
  Touch(it->second, now);
  preempting_.push_back(
      Preemption{.node_id = node_id, .host = it->second.info.host, .reason = reason, .since = now});
  for (const auto& [id, node] : nodes_) {
    if (node.left) continue;
    Event e = MakeEvent(Event::Kind::kPreempt, id, reason);
    e.preempted_node = node_id;
    e.preempted_host = it->second.info.host;
    out->push_back(std::move(e));
  }
  return absl::OkStatus();
}

void Job::PreemptedNodeLeft(const Preemption& p, absl::Time now, std::vector<Event>* out) {
  if (phase_ == Phase::kFinished || LiveCount() >= spec_.min_nodes) return;
  const int code = exit_code::ForSignal(SIGTERM);
  const std::string what = absl::StrCat("node ", p.host, " preempted: ", p.reason);
  Finish(
      "NodePreempted",
      Outcome{.exit_code = code,
              .root_cause = Failure{.kind = FailureKind::kPreempted,
                                    .node_id = p.node_id,
                                    .host = p.host,
                                    .code = code,
                                    .what = what,
                                    .restartable = true},
              .reason = absl::StrCat(what, "; ", LiveCount(), " node", LiveCount() == 1 ? "" : "s",
                                     " left, fewer than --nnodes minimum ", spec_.min_nodes)},
      now, out);
}

const Preemption* Job::PreemptionOf(const std::string& node_id) const {
  for (const Preemption& p : preempting_) {
    if (p.node_id == node_id) return &p;
  }
  return nullptr;
}

absl::StatusOr<NodeInfo> Job::NodeToDrain(const std::string& node_id,
                                          const std::string& host) const {
  NodeInfo drained;
  int matches = 0;
  for (const NodeInfo& n : Nodes()) {
    if ((!node_id.empty() && n.node_id == node_id) || (node_id.empty() && n.host == host)) {
      drained = n;
      ++matches;
    }
  }
  if (matches == 0) {
    return absl::NotFoundError(
        absl::StrCat("job ", spec_.run_id, " has no live node ",
                     node_id.empty() ? absl::StrCat("on host ", host) : node_id,
                     "; `muster status` lists its nodes"));
  }
  if (matches > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("several nodes of job ", spec_.run_id, " run on host ", host,
                     "; name one with --node ID (`muster status` lists their ids)"));
  }
  return drained;
}

}  // namespace muster::rdzv
