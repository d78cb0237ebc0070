#include "h2_wire.h"

#include <gtest/gtest.h>

#include <string>

#include "muster/v1/rendezvous.pb.h"

namespace muster::bench {
namespace {

std::string RoundStartedBytes(int group_rank, int nodes) {
  v1::ServerMessage msg;
  v1::Assignment* a = msg.mutable_round_started()->mutable_assignment();
  a->set_round(3);
  a->set_restart_count(1);
  a->set_group_rank(group_rank);
  a->set_group_world_size(300);
  a->set_rank_base(group_rank * 8);
  a->set_world_size(2400);
  a->set_master_addr("10.0.0.1");
  a->set_master_port(29500);
  for (int i = 0; i < nodes; ++i) {
    v1::NodeInfo* n = a->add_nodes();
    n->set_node_id("b2-" + std::to_string(i));
    n->set_host("127.0.0.1");
    n->set_rank_hint(-1);  // a 10-byte varint
    n->set_local_world_size(8);
  }
  return msg.SerializeAsString();
}

// Feeds `bytes` in pieces of `chunk` bytes.
bool Scan(const std::string& bytes, size_t chunk, RoundStartedScan* scan) {
  scan->Reset(bytes.size());
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  for (size_t off = 0; off < bytes.size(); off += chunk) {
    if (!scan->Feed(p + off, std::min(chunk, bytes.size() - off))) return false;
  }
  return scan->Complete();
}

TEST(RoundStartedScanTest, ReadsTheAssignmentInAnyChunking) {
  for (int nodes : {0, 1, 256}) {
    std::string bytes = RoundStartedBytes(5, nodes);
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{7}, size_t{4096}, bytes.size()}) {
      RoundStartedScan scan;
      ASSERT_TRUE(Scan(bytes, chunk, &scan))
          << nodes << " nodes, chunk " << chunk << ": " << scan.error();
      const Assigned& s = scan.assigned();
      EXPECT_EQ(s.round, 3);
      EXPECT_EQ(s.group_rank, 5);
      EXPECT_EQ(s.group_world_size, 300);
      EXPECT_EQ(s.rank_base, 40);
      EXPECT_EQ(s.world_size, 2400);
      EXPECT_EQ(s.nodes, nodes);
    }
  }
}

TEST(RoundStartedScanTest, ZeroFieldsAreProtoDefaults) {
  RoundStartedScan scan;
  ASSERT_TRUE(Scan(RoundStartedBytes(0, 2), 5, &scan)) << scan.error();
  EXPECT_EQ(scan.assigned().group_rank, 0);
  EXPECT_EQ(scan.assigned().rank_base, 0);
}

TEST(RoundStartedScanTest, RefusesTruncatedAndOverlongInput) {
  std::string bytes = RoundStartedBytes(1, 3);
  RoundStartedScan scan;
  // Truncated: the outer length says more than was fed.
  scan.Reset(bytes.size() + 1);
  ASSERT_TRUE(scan.Feed(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  EXPECT_FALSE(scan.Complete());
  // A message ending inside a field.
  scan.Reset(bytes.size() - 1);
  bool fed = scan.Feed(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size() - 1);
  EXPECT_FALSE(fed && scan.Complete());
  // Not a RoundStarted (Progress{text}) is not complete.
  v1::ServerMessage progress;
  progress.mutable_progress()->set_text("waiting");
  EXPECT_FALSE(Scan(progress.SerializeAsString(), 2, &scan));
}

TEST(H2WireTest, PrefaceCarriesGrpcClientSettings) {
  std::string p = ClientPreface(4194303);
  ASSERT_EQ(p.substr(0, 24), std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
  // SETTINGS: length 36, type 4, flags 0, stream 0; then WINDOW_UPDATE of 4194303 - 65535.
  EXPECT_EQ(p.substr(24, 9), std::string("\x00\x00\x24\x04\x00\x00\x00\x00\x00", 9));
  EXPECT_EQ(p.substr(24 + 9 + 36), std::string("\x00\x00\x04\x08\x00\x00\x00\x00\x00"
                                               "\x00\x3f\x00\x00",
                                               13));
  EXPECT_EQ(ClientPreface(65535).size(), 24u + 9 + 36);  // no WINDOW_UPDATE
}

TEST(H2WireTest, HpackLiteralLengths) {
  std::string out;
  AppendHpackLiteral("te", "trailers", &out);
  EXPECT_EQ(out, std::string("\x00\x02te\x08trailers", 13));
  out.clear();
  AppendHpackString(std::string(127, 'x'), &out);  // 127 = 2^7 - 1: prefix full, then 0
  EXPECT_EQ(out.substr(0, 2), std::string("\x7f\x00", 2));
  out.clear();
  AppendHpackString(std::string(300, 'x'), &out);  // 300 - 127 = 173 = 0x2d + 1 x 128
  EXPECT_EQ(out.substr(0, 3), std::string("\x7f\xad\x01", 3));
  EXPECT_EQ(out.size(), 303u);
}

TEST(H2WireTest, GrpcMessageFrame) {
  v1::AgentMessage leave;
  leave.mutable_leave()->set_why("x");
  std::string body = leave.SerializeAsString();
  std::string out;
  AppendGrpcMessage(leave, /*end_stream=*/true, &out);
  ASSERT_EQ(out.size(), 9 + 5 + body.size());
  EXPECT_EQ(static_cast<uint8_t>(out[2]), 5 + body.size());  // length
  EXPECT_EQ(out[3], 0);                                      // DATA
  EXPECT_EQ(out[4], 1);                                      // END_STREAM
  EXPECT_EQ(out[8], 1);                                      // stream 1
  EXPECT_EQ(out.substr(9, 5), std::string("\x00\x00\x00\x00", 4) + static_cast<char>(body.size()));
  EXPECT_EQ(out.substr(14), body);
}

}  // namespace
}  // namespace muster::bench
