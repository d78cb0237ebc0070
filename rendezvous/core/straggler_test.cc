#include "rendezvous/core/straggler.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

constexpr char kAllReduce[] =
    "all_reduce <- c10d_logger.py:81 wrapper <- train.py:57 step <- train.py:70 <module>";
constexpr char kCompute[] = "matmul <- train.py:40 step <- train.py:70 <module>";

RankStack R(int rank, const std::string& text) {
  return RankStack{.rank = rank, .local_rank = rank % 2, .pid = 100 + rank, .text = text};
}

NodeStacks Node(const std::string& id, std::vector<RankStack> ranks) {
  return NodeStacks{.node_id = id, .host = "host-" + id, .ranks = std::move(ranks)};
}

// The round's participants as StragglerTally::Add takes them (no ranks: each sample has them).
std::vector<NodeStacks> Round() { return {Node("a", {}), Node("b", {})}; }

StragglerSample Sample(std::vector<RankStack> ranks, int window = 10, double share = 0.3) {
  return StragglerSample{.window = window, .share = share, .ranks = std::move(ranks)};
}

// One job-wide sample: node a has ranks 0-1, node b ranks 2-3; `outside` computes, the
// others are in all_reduce (outside -1: all four compute).
std::optional<StragglerVerdict> AddJobSample(StragglerTally& tally, int outside, int window = 10,
                                             double share = 0.3) {
  auto rank = [&](int r) { return R(r, outside == -1 || r == outside ? kCompute : kAllReduce); };
  EXPECT_EQ(tally.Add("a", Round(), Sample({rank(0), rank(1)}, window, share)), std::nullopt);
  return tally.Add("b", Round(), Sample({rank(2), rank(3)}, window, share));
}

TEST(LastRanksTest, TheRanksOutsideTheCollectiveMostRanksWaitIn) {
  std::map<int, std::string> stacks;
  EXPECT_EQ(LastRanks({Node("a", {R(0, kAllReduce), R(1, kAllReduce)}),
                       Node("b", {R(2, kAllReduce), R(3, kCompute)})},
                      &stacks),
            std::vector<int>{3});
  EXPECT_EQ(stacks[3], kCompute);
  // Half waiting is enough: two ranks, one waits for the other.
  EXPECT_EQ(LastRanks({Node("a", {R(0, kCompute), R(1, kAllReduce)})}), std::vector<int>{0});
}

TEST(LastRanksTest, ASampleWhileARankIsInInitProcessGroupIsTheJobStarting) {
  EXPECT_TRUE(Starting({Node("a", {R(0,
                                     "_store_based_barrier <- distributed_c10d.py:1 "
                                     "init_process_group <- train.py:3 <module>"),
                                   R(1, "_call_with_frames_removed <- <frozen importlib>:241")})}));
  EXPECT_FALSE(Starting({Node("a", {R(0, kAllReduce), R(1, kCompute)})}));
}

TEST(LastRanksTest, NoOneIsLastWhenFewWaitOrAllWait) {
  // Most ranks compute: nobody waits for one rank in particular.
  EXPECT_TRUE(LastRanks({Node("a", {R(0, kCompute), R(1, kCompute), R(2, kAllReduce)})}).empty());
  EXPECT_TRUE(LastRanks({Node("a", {R(0, kAllReduce), R(1, kAllReduce)})}).empty());
  EXPECT_TRUE(LastRanks({Node("a", {R(0, kCompute), R(1, kCompute)})}).empty());
  // A rank without a stack is neither waiting nor last.
  RankStack none{.rank = 2, .unavailable = "no stack hook"};
  EXPECT_TRUE(LastRanks({Node("a", {R(0, kAllReduce), R(1, kAllReduce), none})}).empty());
}

TEST(StragglerTallyTest, NamesTheRankLastInTheShareOnceAWholeWindowIsSeen) {
  StragglerTally tally;
  // Window 10: 10 job-wide samples before anyone is named.
  for (int i = 0; i < 9; ++i) EXPECT_EQ(AddJobSample(tally, 3), std::nullopt) << i;
  std::optional<StragglerVerdict> v = AddJobSample(tally, 3);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rank, 3);
  EXPECT_EQ(v->local_rank, 1);
  EXPECT_EQ(v->node_id, "b");
  EXPECT_EQ(v->host, "host-b");
  EXPECT_DOUBLE_EQ(v->share, 1.0);
  EXPECT_EQ(v->stack, kCompute);
  EXPECT_EQ(v->line,
            std::string("rank 3 (local rank 1 on node b, host host-b) is the straggler: the "
                        "others waited for it in 10 of 10 samples (100 %); it was in: ") +
                kCompute);
  // Named once: more of the same says nothing new.
  EXPECT_EQ(AddJobSample(tally, 3), std::nullopt);
  ASSERT_TRUE(tally.named().has_value());
  EXPECT_EQ(tally.named()->rank, 3);
}

TEST(StragglerTallyTest, AnEvenJobNamesNoOne) {
  StragglerTally tally;
  // Each rank last in a quarter of the samples where someone is, half the samples nobody is.
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(AddJobSample(tally, i % 2 == 0 ? -1 : (i / 2) % 4), std::nullopt) << i;
  }
  EXPECT_FALSE(tally.named().has_value());
}

TEST(StragglerTallyTest, BelowTheShareNoOneIsNamed) {
  StragglerTally tally;
  // Rank 1 last in 2 of every 10 samples: 20 % < 30 %.
  for (int i = 0; i < 30; ++i) EXPECT_EQ(AddJobSample(tally, i % 5 == 4 ? 1 : -1), std::nullopt);
  // At the share it is: 3 of 10.
  StragglerTally at;
  std::optional<StragglerVerdict> v;
  for (int i = 0; i < 10 && !v; ++i) v = AddJobSample(at, i % 3 == 0 ? 1 : -1);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rank, 1);
}

TEST(StragglerTallyTest, ClearsBelowHalfTheShareAndRenamesWhenAnotherTakesOver) {
  StragglerTally tally;
  for (int i = 0; i < 10; ++i) AddJobSample(tally, 3);
  ASSERT_EQ(tally.named()->rank, 3);
  // Rank 0 becomes the one the others wait for: renamed once it passes rank 3's share.
  std::optional<StragglerVerdict> v;
  int i = 0;
  for (; i < 10 && !v; ++i) v = AddJobSample(tally, 0);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rank, 0);
  EXPECT_EQ(i, 6);  // 6 of 10 for rank 0 against 4 for rank 3
  // Even again: rank 0 stays named down to 15 %, then clears once.
  v.reset();
  for (i = 0; i < 10 && !v; ++i) v = AddJobSample(tally, -1);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rank, -1);
  EXPECT_EQ(i, 9);  // 1 of 10 < 15 %
  EXPECT_EQ(v->line,
            "rank 0 no longer keeps the others waiting (last in 1 of 10 samples, 10 %): "
            "no straggler");
  EXPECT_FALSE(tally.named().has_value());
}

TEST(StragglerTallyTest, JoinsOnlySamplesOfTheSameTickAndSkipsTheStart) {
  StragglerTally tally;
  StragglerSample a = Sample({R(0, kCompute), R(1, kAllReduce)}, 1, 0.3);
  StragglerSample b = Sample({R(2, kAllReduce), R(3, kAllReduce)}, 1, 0.3);
  a.tick = 7;
  b.tick = 8;  // node a skipped tick 8 (a slow dump): no job-wide sample of 7 or 8
  EXPECT_EQ(tally.Add("a", Round(), a), std::nullopt);
  EXPECT_EQ(tally.Add("b", Round(), b), std::nullopt);
  a.tick = 9;
  EXPECT_EQ(tally.Add("a", Round(), a), std::nullopt);
  // Tick 9 while a rank is still in init_process_group: the job is starting, not judged.
  StragglerSample starting = b;
  starting.tick = 9;
  starting.ranks[0].text = "_store_based_barrier <- distributed_c10d.py:1 init_process_group";
  EXPECT_EQ(tally.Add("b", Round(), starting), std::nullopt);
  a.tick = b.tick = 10;
  EXPECT_EQ(tally.Add("a", Round(), a), std::nullopt);
  std::optional<StragglerVerdict> v = tally.Add("b", Round(), b);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rank, 0);
  EXPECT_EQ(v->samples, 1);
}

TEST(StragglerTallyTest, WaitsForEveryNodeAndIgnoresOthers) {
  StragglerTally tally;
  StragglerSample s = Sample({R(0, kCompute), R(1, kAllReduce)}, 1, 0.3);
  // A node not in the round counts for nothing; node a twice is still one sample.
  EXPECT_EQ(tally.Add("z", Round(), s), std::nullopt);
  EXPECT_EQ(tally.Add("a", Round(), s), std::nullopt);
  EXPECT_EQ(tally.Add("a", Round(), s), std::nullopt);
  std::optional<StragglerVerdict> v =
      tally.Add("b", Round(), Sample({R(2, kAllReduce), R(3, kAllReduce)}, 1, 0.3));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->rank, 0);
  EXPECT_EQ(v->samples, 1);
}

}  // namespace
}  // namespace muster::rdzv
