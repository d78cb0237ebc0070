#include "rendezvous/c10d/request_parser.h"

#include <string>

#include "gtest/gtest.h"
#include "rendezvous/c10d/wire.h"

namespace muster::c10d {
namespace {

std::string Hex(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

// contract §1.9: 1.13 ADD("init/", 1).
const std::string kLegacyAddInit =
    Hex({0x03, 5, 0, 0, 0, 0, 0, 0, 0, 'i', 'n', 'i', 't', '/', 1, 0, 0, 0, 0, 0, 0, 0});

TEST(DetectProtocolTest, FirstByteOtherThanZeroIsLegacyAtOnce) {
  EXPECT_EQ(DetectProtocol("").protocol, Protocol::kUnknown);
  Detection d = DetectProtocol(Hex({0x06}));  // legacy GETNUMKEYS, 1 byte
  EXPECT_EQ(d.protocol, Protocol::kLegacy);
  EXPECT_EQ(d.consumed, 0u);
}

TEST(DetectProtocolTest, ValidateMagicIsModern) {
  std::string validate = Hex({0x00, 0xCE, 0xF7, 0x85, 0x3C});
  for (size_t n = 1; n < validate.size(); ++n) {
    EXPECT_EQ(DetectProtocol(validate.substr(0, n)).protocol, Protocol::kUnknown) << n;
  }
  Detection d = DetectProtocol(validate + Hex({0x0D}));
  EXPECT_EQ(d.protocol, Protocol::kModern);
  EXPECT_EQ(d.consumed, 5u);
}

TEST(DetectProtocolTest, LegacySetIsLegacy) {
  Detection d = DetectProtocol(Hex({0x00, 0x03, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(d.protocol, Protocol::kLegacy);
  EXPECT_EQ(d.consumed, 0u);
}

TEST(ParseRequestTest, LegacyAddFromContractTrace) {
  Request r;
  auto outcome = ParseRequest(Protocol::kLegacy, kLegacyAddInit, Limits{}, &r);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->complete);
  EXPECT_EQ(outcome->size, kLegacyAddInit.size());
  EXPECT_EQ(r.op, Op::kAdd);
  ASSERT_EQ(r.keys.size(), 1u);
  EXPECT_EQ(r.keys[0], "init/");
  EXPECT_EQ(r.number, 1);
}

TEST(ParseRequestTest, EveryPrefixIsIncompleteWithAGrowingNeed) {
  std::string two = kLegacyAddInit + kLegacyAddInit;
  for (size_t n = 0; n < kLegacyAddInit.size(); ++n) {
    Request r;
    auto outcome = ParseRequest(Protocol::kLegacy, two.substr(0, n), Limits{}, &r);
    ASSERT_TRUE(outcome.ok()) << n;
    EXPECT_FALSE(outcome->complete) << n;
    EXPECT_GT(outcome->size, n);
    EXPECT_LE(outcome->size, kLegacyAddInit.size());
  }
  Request r;
  auto outcome = ParseRequest(Protocol::kLegacy, two, Limits{}, &r);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->size, kLegacyAddInit.size());  // only the first request
}

TEST(ParseRequestTest, HugeLengthIsRejectedBeforeTheBytesArrive) {
  std::string req = Hex({0x02});  // legacy GET
  AppendU64(&req, uint64_t{1} << 60);
  Request r;
  auto outcome = ParseRequest(Protocol::kLegacy, req, Limits{}, &r);
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseRequestTest, ValueAndCountLimits) {
  Limits limits;
  limits.max_value_bytes = 4;
  limits.max_keys_per_request = 2;
  std::string set = Hex({0x00});
  AppendString(&set, "k");
  AppendString(&set, "12345");
  Request r;
  EXPECT_FALSE(ParseRequest(Protocol::kLegacy, set, limits, &r).ok());
  std::string wait = Hex({0x05});
  AppendU64(&wait, 3);
  EXPECT_FALSE(ParseRequest(Protocol::kLegacy, wait, limits, &r).ok());
  std::string ok_wait = Hex({0x05});
  AppendU64(&ok_wait, 2);
  auto outcome = ParseRequest(Protocol::kLegacy, ok_wait, limits, &r);
  ASSERT_TRUE(outcome.ok());
  EXPECT_FALSE(outcome->complete);
}

TEST(ParseRequestTest, UnknownOpcodesAreErrors) {
  Request r;
  EXPECT_FALSE(ParseRequest(Protocol::kLegacy, Hex({0x0D}), Limits{}, &r).ok());
  EXPECT_FALSE(ParseRequest(Protocol::kModern, Hex({0x13}), Limits{}, &r).ok());
  EXPECT_FALSE(ParseRequest(Protocol::kModern, Hex({0x00, 0xCE, 0xF7, 0x85, 0x3C}), Limits{}, &r)
                   .ok());  // VALIDATE only once, consumed by detection
  EXPECT_FALSE(ParseRequest(Protocol::kLegacy, Hex({0xFF}), Limits{}, &r).ok());
}

TEST(ParseRequestTest, OpcodeTablesMatchTheContract) {
  EXPECT_EQ(DecodeOpcode(Protocol::kLegacy, 0), Op::kSet);
  EXPECT_EQ(DecodeOpcode(Protocol::kLegacy, 7), Op::kWatchKey);
  EXPECT_EQ(DecodeOpcode(Protocol::kLegacy, 12), Op::kCancelWait);
  EXPECT_EQ(DecodeOpcode(Protocol::kModern, 0), Op::kValidate);
  EXPECT_EQ(DecodeOpcode(Protocol::kModern, 1), Op::kSet);
  EXPECT_EQ(DecodeOpcode(Protocol::kModern, 7), Op::kGetNumKeys);
  EXPECT_EQ(DecodeOpcode(Protocol::kModern, 8), Op::kDeleteKey);
  EXPECT_EQ(DecodeOpcode(Protocol::kModern, 13), Op::kPing);
  EXPECT_EQ(DecodeOpcode(Protocol::kModern, 18), Op::kBarrier);
  EXPECT_EQ(DecodeOpcode(Protocol::kModern, 19), std::nullopt);
  EXPECT_EQ(DecodeOpcode(Protocol::kLegacy, 13), std::nullopt);
}

TEST(ParseRequestTest, ModernMultiSetAndPing) {
  std::string req = Hex({0x0B});
  AppendU64(&req, 2);
  AppendString(&req, "a");
  AppendString(&req, "1");
  AppendString(&req, "b");
  AppendString(&req, "");
  req += Hex({0x0D, 0x78, 0x56, 0x34, 0x12});
  Request r;
  auto outcome = ParseRequest(Protocol::kModern, req, Limits{}, &r);
  ASSERT_TRUE(outcome.ok());
  ASSERT_TRUE(outcome->complete);
  EXPECT_EQ(r.op, Op::kMultiSet);
  EXPECT_EQ(r.keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.values, (std::vector<std::string>{"1", ""}));
  outcome =
      ParseRequest(Protocol::kModern, std::string_view(req).substr(outcome->size), Limits{}, &r);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(r.op, Op::kPing);
  EXPECT_EQ(r.nonce, 0x12345678u);
}

}  // namespace
}  // namespace muster::c10d
