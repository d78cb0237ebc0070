// Job (job.h): a node's health gate (agent/health/health_gate.h, docs/design.md §3
// "Health gate") keeps it out of rounds, or lets it back in. The node stays live and
// listed (kExcluded, with its reason), so that a sick node is seen in the status instead of
// missing from it; it counts toward no round until it says it is healthy again, then it
// arrives as a joiner does.
#include "absl/strings/str_cat.h"
#include "rendezvous/core/job.h"

namespace muster::rdzv {

void Job::NodeHealth(const std::string& node_id, const std::string& excluded, absl::Time now,
                     std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.left || phase_ == Phase::kFinished) return;
  Node& node = it->second;
  Touch(node, now);
  const bool was_excluded = !node.info.excluded.empty();
  node.info.excluded = excluded;
  if (excluded.empty() == !was_excluded) return;  // the same verdict: only the reason changes
  if (!excluded.empty()) {
    ++excluded_count_;
    out->push_back(MakeEvent(Event::Kind::kProgress, node_id,
                             absl::StrCat("kept out of rounds until healthy: ", excluded)));
    // A gathering that counted it may have lost its quorum; a running round goes on (the
    // gate speaks between rounds: this node has stopped or is about to report so).
    if (phase_ == Phase::kGathering && EligibleCount() < spec_.min_nodes) last_call_.reset();
    return;
  }
  --excluded_count_;
  if (IsParticipant(node_id)) return;  // it ran this round: the next one counts it again
  Arrive(node.info, "NodeHealthy", now, out);
}

}  // namespace muster::rdzv
