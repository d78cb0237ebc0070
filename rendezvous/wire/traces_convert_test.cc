// Round trips of rendezvous/wire/traces_convert (see proto_convert_test.cc for the method).
#include "rendezvous/wire/traces_convert.h"

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

TEST(TracesConvertTest, TraceChunkRoundTrips) {
  Distinct d;
  TraceChunk c{.round = d.Int(),
               .file = d.Str("file"),
               .offset = d.Int64(),
               .data = d.Str("data"),
               .done = true,
               .note = d.Str("note"),
               .dir = d.Str("dir"),
               .paths = {d.Str("path"), d.Str("path")}};
  v1::TraceChunk wire;
  ToProto(c, &wire);
  EXPECT_EQ(UnsetFields(wire), Paths{});
  // dir stays on the agent (traces.h: "not sent"; etcd sends `paths` instead).
  c.dir.clear();
  EXPECT_TRUE(FromProto(wire) == c) << wire.DebugString();
}

TEST(TracesConvertTest, TracesStoredRoundTrips) {
  Distinct d;
  const TracesSummary s = wire_test::FullTracesSummary(d);
  v1::TracesStored wire;
  ToProto(s, &wire);
  EXPECT_EQ(UnsetFields(wire), Paths{});
  EXPECT_TRUE(FromProto(wire) == s) << wire.DebugString();
}

TEST(TracesConvertTest, TraceRoundRoundTrips) {
  Distinct d;
  TraceRound r{.round = d.Int(), .location = d.Str("location")};
  for (int i = 0; i < 2; ++i) {
    r.nodes.push_back(TraceNode{.node_id = d.Str("node"),
                                .host = d.Str("host"),
                                .files = {d.Str("file"), d.Str("file")},
                                .bytes = d.Int64(),
                                .note = d.Str("note")});
  }
  r.reported = {d.Str("reported"), d.Str("reported")};
  v1::TraceRound wire;
  ToProto(r, &wire);
  EXPECT_EQ(UnsetFields(wire), Paths{});
  // reported is the server's bookkeeping of whose upload is complete (trace_rounds.cc);
  // the status shows the stored files, not it, so the wire leaves it out.
  r.reported.clear();
  EXPECT_TRUE(FromProto(wire) == r) << wire.DebugString();
}

}  // namespace
}  // namespace muster::rdzv::wire
