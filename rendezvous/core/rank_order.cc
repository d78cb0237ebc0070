#include "rendezvous/core/rank_order.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>

namespace muster::rdzv {

std::vector<size_t> RankOrder(const std::vector<RankCandidate>& nodes, int max_nodes) {
  constexpr int64_t kLast = std::numeric_limits<int64_t>::max();
  std::vector<size_t> order(nodes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto key = [&](size_t i) {
    const RankCandidate& n = nodes[i];
    return std::make_tuple(n.rank_hint >= 0 ? n.rank_hint : kLast,
                           n.prev_group_rank >= 0 ? n.prev_group_rank : kLast, n.arrival);
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  if (static_cast<int64_t>(order.size()) > max_nodes) order.resize(std::max(max_nodes, 0));

  // Hinted nodes take their positions; the rest fill the free ones in the order above.
  constexpr size_t kFree = std::numeric_limits<size_t>::max();
  std::vector<size_t> placed(order.size(), kFree);
  std::vector<size_t> rest;
  for (size_t i : order) {
    int64_t hint = nodes[i].rank_hint;
    if (hint >= 0 && hint < static_cast<int64_t>(placed.size()) && placed[hint] == kFree) {
      placed[hint] = i;
    } else {
      rest.push_back(i);
    }
  }
  size_t next = 0;
  for (size_t& slot : placed) {
    if (slot == kFree) slot = rest[next++];
  }
  return placed;
}

}  // namespace muster::rdzv
