#include "rendezvous/registry/stacks_broker.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

TEST(StacksBrokerTest, ReturnsOnceEveryNodeAnswered) {
  StacksBroker broker;
  int64_t id = broker.Open({"a", "b"});
  broker.Deliver("a", id, {{.rank = 0, .text = "x"}});
  broker.Deliver("c", id, {{.rank = 9}});      // not asked: ignored
  broker.Deliver("a", id + 1, {{.rank = 5}});  // another request: ignored
  std::thread late([&] { broker.Deliver("b", id, {{.rank = 1}}); });
  absl::Time start = absl::Now();
  auto answers = broker.Wait(id, start + absl::Seconds(30));
  late.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers["a"][0].text, "x");
  EXPECT_EQ(answers["b"][0].rank, 1);
}

TEST(StacksBrokerTest, DeadlineLeavesOutTheSilentAndClosesTheRequest) {
  StacksBroker broker;
  int64_t id = broker.Open({"a", "b"});
  broker.Deliver("a", id, {});
  auto answers = broker.Wait(id, absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers.count("a"));
  broker.Deliver("b", id, {{.rank = 1}});  // too late: closed, ignored
  EXPECT_TRUE(broker.Wait(id, absl::Now()).empty());
  EXPECT_NE(broker.Open({}), id);
}

}  // namespace
}  // namespace muster::rdzv
