// Round trips of rendezvous/wire/stacks_convert (see proto_convert_test.cc for the method):
// stacks, hang reports and straggler samples and verdicts.
#include "rendezvous/wire/stacks_convert.h"

#include <set>
#include <string>

#include "gtest/gtest.h"
#include "muster/v1/rendezvous.pb.h"
#include "rendezvous/wire/wire_test_util.h"

namespace muster::rdzv::wire {
namespace {

using wire_test::Distinct;
using wire_test::UnsetFields;
using Paths = std::set<std::string>;

RankStack FullRankStack(Distinct& d) {
  return RankStack{.rank = d.Int(),
                   .local_rank = d.Int(),
                   .pid = d.Int(),
                   .text = d.Str("text"),
                   .unavailable = d.Str("unavailable")};
}

TEST(StacksConvertTest, RankStackRoundTrips) {
  Distinct d;
  const RankStack r = FullRankStack(d);
  v1::RankStack wire;
  ToProto(r, &wire);
  EXPECT_EQ(UnsetFields(wire), Paths{});
  EXPECT_TRUE(FromProto(wire) == r) << wire.DebugString();
}

TEST(StacksConvertTest, NodeStacksRoundTrips) {
  Distinct d;
  const NodeStacks n{.node_id = d.Str("node"),
                     .host = d.Str("host"),
                     .group_rank = d.Int(),
                     .ranks = {FullRankStack(d), FullRankStack(d)},
                     .unavailable = d.Str("unavailable")};
  v1::NodeStacks wire;
  ToProto(n, &wire);
  // id: the StacksRequest's, which the agent copies into its answer (grpc/client.cc,
  // etcd/etcd_rendezvous.cc); NodeStacks, the server's gathered view, has none.
  EXPECT_EQ(UnsetFields(wire), Paths{"id"});
  EXPECT_TRUE(FromProto(wire) == n) << wire.DebugString();
}

TEST(StacksConvertTest, StalledRoundTripsBothWays) {
  // restartable defaults to true: both values, so that a dropped field shows either way.
  for (bool flag : {true, false}) {
    Distinct d;
    const int round = d.Int();
    const Stall s{
        .stalled = flag, .restartable = flag, .ranks = {FullRankStack(d), FullRankStack(d)}};
    v1::Stalled wire;
    ToProto(round, s, &wire);
    const Paths expected_unset = flag ? Paths{} : Paths{"restartable", "stalled"};
    EXPECT_EQ(UnsetFields(wire), expected_unset);
    EXPECT_EQ(wire.round(), round);
    EXPECT_TRUE(FromProto(wire) == s) << wire.DebugString();
  }
}

TEST(StacksConvertTest, StragglerSampleRoundTrips) {
  Distinct d;
  const int round = d.Int();
  const StragglerSample s{.tick = d.Int64(),
                          .window = d.Int(),
                          .share = d.Double(),
                          .ranks = {FullRankStack(d), FullRankStack(d)}};
  v1::StragglerSample wire;
  ToProto(round, s, &wire);
  EXPECT_EQ(UnsetFields(wire), Paths{});
  EXPECT_EQ(wire.round(), round);
  EXPECT_TRUE(FromProto(wire) == s) << wire.DebugString();
}

TEST(StacksConvertTest, StragglerVerdictRoundTrips) {
  Distinct d;
  const StragglerVerdict v{.rank = d.Int(),
                           .local_rank = d.Int(),
                           .node_id = d.Str("node"),
                           .host = d.Str("host"),
                           .share = d.Double(),
                           .samples = d.Int(),
                           .stack = d.Str("stack"),
                           .line = d.Str("line")};
  v1::Straggler wire;
  ToProto(v, &wire);
  EXPECT_EQ(UnsetFields(wire), Paths{});
  EXPECT_TRUE(FromProto(wire) == v) << wire.DebugString();
  // A verdict that clears one (rank -1) stays a clearing one.
  const StragglerVerdict cleared;
  v1::Straggler cleared_wire;
  ToProto(cleared, &cleared_wire);
  EXPECT_TRUE(FromProto(cleared_wire) == cleared) << cleared_wire.DebugString();
}

}  // namespace
}  // namespace muster::rdzv::wire
