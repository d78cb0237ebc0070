#include "rendezvous/core/rank_order.h"

#include <vector>

#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

RankCandidate Newcomer(int64_t arrival) { return RankCandidate{.arrival = arrival}; }
RankCandidate Hinted(int hint, int64_t arrival) {
  return RankCandidate{.rank_hint = hint, .arrival = arrival};
}
RankCandidate Survivor(int prev, int64_t arrival) {
  return RankCandidate{.prev_group_rank = prev, .arrival = arrival};
}

using Order = std::vector<size_t>;

TEST(RankOrderTest, NewcomersInArrivalOrderUpToTheMaximum) {
  std::vector<RankCandidate> nodes = {Newcomer(2), Newcomer(0), Newcomer(3), Newcomer(1)};
  EXPECT_EQ(RankOrder(nodes, 4), (Order{1, 3, 0, 2}));
  EXPECT_EQ(RankOrder(nodes, 2), (Order{1, 3}));  // the last to arrive wait
}

TEST(RankOrderTest, SurvivorsKeepTheirOrderAheadOfNewcomers) {
  // Survivors of a round of three (rank 1 was lost) and a newcomer that arrived first.
  std::vector<RankCandidate> nodes = {Newcomer(0), Survivor(2, 5), Survivor(0, 7)};
  EXPECT_EQ(RankOrder(nodes, 3), (Order{2, 1, 0}));
}

TEST(RankOrderTest, AHintIsAPositionNotOnlyAPriority) {
  std::vector<RankCandidate> nodes = {Newcomer(0), Newcomer(1), Hinted(2, 2)};
  EXPECT_EQ(RankOrder(nodes, 3), (Order{0, 1, 2}));  // rank 2, though hints sort first
  nodes = {Hinted(1, 0), Hinted(0, 1), Survivor(0, 2)};
  EXPECT_EQ(RankOrder(nodes, 3), (Order{1, 0, 2}));
}

TEST(RankOrderTest, AHintBeyondTheRoundFallsBackToItsOrder) {
  // An elastic round of two: the node hinted 3 still comes first among the others.
  std::vector<RankCandidate> nodes = {Newcomer(0), Hinted(3, 1)};
  EXPECT_EQ(RankOrder(nodes, 4), (Order{1, 0}));
}

TEST(RankOrderTest, HintedNodesAreChosenFirstWhenThereAreTooMany) {
  std::vector<RankCandidate> nodes = {Survivor(0, 0), Survivor(1, 1), Hinted(1, 2)};
  EXPECT_EQ(RankOrder(nodes, 2), (Order{0, 2}));
}

}  // namespace
}  // namespace muster::rdzv
