#include "base/closest_name.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(EditDistanceTest, CountsEditsAndSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("abc", ""), 3);
  EXPECT_EQ(EditDistance("nnodes", "nnodes"), 0);
  EXPECT_EQ(EditDistance("nnode", "nnodes"), 1);
  EXPECT_EQ(EditDistance("nodes", "nnodes"), 1);
  EXPECT_EQ(EditDistance("nndoes", "nnodes"), 1);  // a swap of neighbours is one edit
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(ClosestNameTest, SuggestsTheNearestWithinAThirdOfTheWord) {
  std::vector<std::string> flags = {"nnodes", "node-rank", "nproc-per-node", "max-restarts"};
  EXPECT_EQ(ClosestName("nproc-per-nodes", flags), "nproc-per-node");
  EXPECT_EQ(ClosestName("max-restart", flags), "max-restarts");
  EXPECT_EQ(ClosestName("node-rnak", flags), "node-rank");
  EXPECT_EQ(ClosestName("nnode", flags), "nnodes");
  // Too far from everything: no guess rather than a wrong one.
  EXPECT_EQ(ClosestName("start-method", flags), "");
  EXPECT_EQ(ClosestName("x", flags), "");
}

// A prefix is the flag parser's to resolve (a unique one is the flag, a shared one an error
// naming the flags), never a guess here.
TEST(ClosestNameTest, AnAbbreviationIsNoGuess) {
  std::vector<std::string> flags = {"nproc-per-node", "max-restarts", "master-addr", "master-port"};
  EXPECT_EQ(ClosestName("nproc", flags), "");
  EXPECT_EQ(ClosestName("master", flags), "");
}

}  // namespace
}  // namespace muster
