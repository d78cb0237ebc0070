// RoundPreemptions (round_preemptions.h): the round's preemption notices, one per node.
#include "rendezvous/core/round_preemptions.h"

#include <utility>

namespace muster::rdzv {

bool RoundPreemptions::Add(Preemption p) {
  if (Of(p.node_id) != nullptr) return false;
  preempting_.push_back(std::move(p));
  return true;
}

const Preemption* RoundPreemptions::Of(const std::string& node_id) const {
  for (const Preemption& p : preempting_) {
    if (p.node_id == node_id) return &p;
  }
  return nullptr;
}

}  // namespace muster::rdzv
