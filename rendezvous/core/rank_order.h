// RankOrder: who takes part in the next round, and in which group-rank order (docs/design.md §4.3
// "Ranks"): nodes with a rank hint first (by hint), then the previous round's survivors in
// their previous order, then newcomers in arrival order; the first max_nodes of them form
// the round. A hint is then a position, not only a priority: with some nodes hinted and
// others not, `--node-rank 2` is still group rank 2 (when the round has that many nodes),
// and the others fill the free positions in the order above. Pure; torch gives no such
// promise of stable ranks.
#ifndef MUSTER_RENDEZVOUS_CORE_RANK_ORDER_H_
#define MUSTER_RENDEZVOUS_CORE_RANK_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace muster::rdzv {

// One node as the ordering sees it.
struct RankCandidate {
  int rank_hint = -1;        // --node-rank; -1: none. Distinct among candidates.
  int prev_group_rank = -1;  // its group rank in the previous round; -1: a newcomer
  int64_t arrival = 0;       // join order, distinct among candidates
};

// Indices into `nodes` of the round's participants, by group rank; at most `max_nodes`.
std::vector<size_t> RankOrder(const std::vector<RankCandidate>& nodes, int max_nodes);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_RANK_ORDER_H_
