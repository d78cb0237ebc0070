// BadNodes (bad_nodes.h): counting root causes per host, what counts, when a host is due,
// the reasons kept, and the rebuild from a restart history.
#include "rendezvous/core/bad_nodes.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

Failure On(const std::string& host, FailureKind kind = FailureKind::kWorker, int code = 1) {
  return Failure{.kind = kind,
                 .node_id = host + ":1:ab",
                 .host = host,
                 .rank = 3,
                 .code = code,
                 .what = "exit " + std::to_string(code)};
}

TEST(BadNodesTest, AHostIsDueOnceItWasTheRootCauseThresholdTimes) {
  BadNodes bad(2);
  EXPECT_FALSE(bad.Record(1, On("a")));
  EXPECT_FALSE(bad.Record(2, On("b")));
  EXPECT_TRUE(bad.Due().empty());
  EXPECT_TRUE(bad.Record(3, On("a", FailureKind::kHung, 138)));  // a hang's culprit counts too
  EXPECT_EQ(bad.Due(), std::vector<std::string>{"a"});
  EXPECT_EQ(bad.count("a"), 2);
  EXPECT_EQ(bad.count("b"), 1);
  EXPECT_EQ(bad.Reason("a"),
            "quarantined: root cause of 2 failed attempts (round 1: rank 3 exit 1; round 3: rank "
            "3 exit 138)");
  bad.Quarantine("a");
  EXPECT_TRUE(bad.quarantined("a"));
  EXPECT_FALSE(bad.quarantined("b"));
  EXPECT_TRUE(bad.Due().empty());
  EXPECT_FALSE(bad.Record(4, On("a")));  // counts on, due no more
  EXPECT_EQ(bad.count("a"), 3);
}

TEST(BadNodesTest, ALostOrPreemptedNodeIsNotARootCauseOfItsHost) {
  BadNodes bad(1);
  EXPECT_FALSE(bad.Record(1, On("a", FailureKind::kNodeLost, 138)));
  EXPECT_FALSE(bad.Record(2, On("a", FailureKind::kPreempted, 143)));
  EXPECT_EQ(bad.count("a"), 0);
  EXPECT_TRUE(bad.Due().empty());
}

TEST(BadNodesTest, ZeroNeverMakesAHostDueButStillCounts) {
  BadNodes bad(0);
  for (int round = 1; round <= 5; ++round) EXPECT_FALSE(bad.Record(round, On("a")));
  EXPECT_TRUE(bad.Due().empty());
  EXPECT_EQ(bad.count("a"), 5);
}

TEST(BadNodesTest, KeepsTheLatestReasonsWithTheDetail) {
  BadNodes bad(9);
  for (int round = 1; round <= 6; ++round) {
    Failure f = On("a", FailureKind::kWorker, round);
    if (round == 6) f.message = "CUDA error: an illegal memory access";
    bad.Record(round, f);
  }
  const std::string reason = bad.Reason("a");
  EXPECT_NE(reason.find("root cause of 6 failed attempts (round 3: rank 3 exit 3;"),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("round 6: rank 3 exit 6: CUDA error: an illegal memory access)"),
            std::string::npos)
      << reason;
  EXPECT_EQ(reason.find("round 2:"), std::string::npos) << reason;
}

TEST(BadNodesTest, ReplayCountsTheCountedFailuresOfAHistory) {
  std::vector<RestartRecord> history = {
      {.round = 1, .reason = "worker failure", .counted = true, .failure = On("a")},
      {.round = 2, .reason = "node joined", .counted = false},
      {.round = 3,
       .reason = "node lost: the coordinator",
       .counted = false,
       .failure = On("a", FailureKind::kNodeLost, 138)},
      {.round = 4, .reason = "worker failure", .counted = true, .failure = On("b")},
  };
  BadNodes bad(2);
  bad.Replay(history);
  EXPECT_EQ(bad.count("a"), 1);
  EXPECT_EQ(bad.count("b"), 1);
  EXPECT_TRUE(bad.Record(5, On("a")));  // the next coordinator's first failure there: due
}

}  // namespace
}  // namespace muster::rdzv
