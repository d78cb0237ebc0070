#include "rendezvous/shared_port/first_bytes.h"

#include <string>

#include "gtest/gtest.h"

namespace muster::shared_port {
namespace {

TEST(FirstBytesTest, NothingYetIsUndecided) {
  EXPECT_EQ(ClassifyFirstBytes(""), Protocol::kUndecided);
}

TEST(FirstBytesTest, EveryProperPrefixOfThePrefaceWaitsForMore) {
  for (size_t n = 1; n < kHttp2Preface.size(); ++n) {
    EXPECT_EQ(ClassifyFirstBytes(kHttp2Preface.substr(0, n)), Protocol::kUndecided) << n;
  }
}

TEST(FirstBytesTest, TheWholePrefaceIsHttp2WithOrWithoutFramesAfterIt) {
  EXPECT_EQ(ClassifyFirstBytes(kHttp2Preface), Protocol::kHttp2);
  std::string with_settings = std::string(kHttp2Preface) + std::string("\0\0\0\4\0\0\0\0\0", 9);
  EXPECT_EQ(ClassifyFirstBytes(with_settings), Protocol::kHttp2);
}

TEST(FirstBytesTest, EveryStoreOpcodeDecidesOnItsFirstByte) {
  // Legacy opcodes (torch 1.13-2.1) and the modern ones, VALIDATE (0) included
  // (reference/torch_contract.md §1.2): none is 'P'.
  for (int op = 0; op <= 0x20; ++op) {
    EXPECT_EQ(ClassifyFirstBytes(std::string(1, static_cast<char>(op))), Protocol::kStore) << op;
  }
  // Modern VALIDATE: opcode 0, then the magic CE F7 85 3C.
  EXPECT_EQ(ClassifyFirstBytes(std::string("\0\xCE\xF7\x85\x3C", 5)), Protocol::kStore);
}

TEST(FirstBytesTest, APrefaceThatGoesWrongIsNotHttp2) {
  EXPECT_EQ(ClassifyFirstBytes("PRX"), Protocol::kStore);
  EXPECT_EQ(ClassifyFirstBytes("PRI * HTTP/1.1\r\n\r\nSM\r\n\r\n"), Protocol::kStore);
  EXPECT_EQ(ClassifyFirstBytes("GET / HTTP/1.1\r\n"), Protocol::kStore);
}

TEST(FirstBytesTest, SilenceAtTheDeadlineIsAStoreClientAndAStalledPrefaceIsNeither) {
  EXPECT_EQ(ClassifyAtDeadline(""), Protocol::kStore);  // torch 1.13's callback connection
  EXPECT_EQ(ClassifyAtDeadline("PRI * HT"), Protocol::kUndecided);
  EXPECT_EQ(ClassifyAtDeadline(kHttp2Preface), Protocol::kHttp2);
  EXPECT_EQ(ClassifyAtDeadline(std::string(1, '\3')), Protocol::kStore);
}

}  // namespace
}  // namespace muster::shared_port
