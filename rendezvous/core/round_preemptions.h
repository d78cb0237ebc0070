// RoundPreemptions: the nodes of a Job's running round that announced their preemption
// (SIGTERM to the agent, a spot notice, `muster drain`; docs/guides/preemption.md). A notice
// goes to every live node before anything is stopped (Job::Preempt); the preempted node
// leaves afterwards, and its loss ends a job below min_nodes with SIGTERM's code instead of
// 138 (Job's RemoveNode asks Of). The notices are the round's: a new round clears them.
#ifndef MUSTER_RENDEZVOUS_CORE_ROUND_PREEMPTIONS_H_
#define MUSTER_RENDEZVOUS_CORE_ROUND_PREEMPTIONS_H_

#include <string>
#include <vector>

#include "rendezvous/core/types.h"

namespace muster::rdzv {

class RoundPreemptions {
 public:
  // Records a notice; false when its node announced already (a notice is idempotent per node).
  bool Add(Preemption p);
  // The node's preemption in this round, or null.
  const Preemption* Of(const std::string& node_id) const;
  // A round starts: the notices were the previous round's.
  void Clear() { preempting_.clear(); }
  // In the order they came.
  const std::vector<Preemption>& all() const { return preempting_; }

 private:
  std::vector<Preemption> preempting_;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_ROUND_PREEMPTIONS_H_
