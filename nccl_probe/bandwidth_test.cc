#include "nccl_probe/bandwidth.h"

#include "gtest/gtest.h"
#include "nccl_probe/nccl_version.h"

namespace muster::probe {
namespace {

// nccl-tests doc/PERFORMANCE.md: algbw = S/t; all_reduce busbw = algbw * 2(n-1)/n.
TEST(BandwidthTest, AllReduceMatchesNcclTests) {
  // 8 GPUs, 1 GiB in 4 ms: algbw 268.435456 GB/s, busbw * 1.75 = 469.76.
  EXPECT_DOUBLE_EQ(AlgBwGBps(1ULL << 30, 0.004), 268.435456);
  EXPECT_DOUBLE_EQ(BusBwGBps(Collective::kAllReduce, 1ULL << 30, 0.004, 8), 268.435456 * 1.75);
  // 2 GPUs: factor 1; 1 GPU: busbw 0 (nothing crosses a bus).
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBwGBps(Collective::kAllReduce, 1 << 20, 0.001, 1), 0.0);
}

TEST(BandwidthTest, FactorsPerCollective) {
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kReduce, 4), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllReduce, 0), 0.0);
}

TEST(BandwidthTest, ZeroTimeIsZeroBandwidth) {
  EXPECT_EQ(AlgBwGBps(8, 0), 0);
  EXPECT_EQ(AlgBwGBps(8, -1), 0);
}

// reference/perf.md §3: 8xH100 NVLS peak "busBw ~480 GB/s (algBw ~275 GB/s)".
TEST(BandwidthTest, PerfAnchorIsConsistent) {
  const double algbw = 275.0;
  const double seconds = (1ULL << 32) / (algbw * 1e9);
  EXPECT_NEAR(BusBwGBps(Collective::kAllReduce, 1ULL << 32, seconds, 8), 481.25, 1e-9);
}

TEST(MessageSizesTest, EightBytesToOneGiB) {
  auto sizes = MessageSizes(8, 1ULL << 30, 2);
  ASSERT_TRUE(sizes.ok());
  EXPECT_EQ(sizes->size(), 28u);
  EXPECT_EQ(sizes->front(), 8u);
  EXPECT_EQ(sizes->back(), 1ULL << 30);
}

TEST(MessageSizesTest, RejectsBadRanges) {
  EXPECT_FALSE(MessageSizes(0, 8, 2).ok());
  EXPECT_FALSE(MessageSizes(16, 8, 2).ok());
  EXPECT_FALSE(MessageSizes(8, 16, 1).ok());
  auto one = MessageSizes(8, 8, 2);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
  auto near_max = MessageSizes(1ULL << 62, UINT64_MAX, 4);
  ASSERT_TRUE(near_max.ok());
  EXPECT_EQ(near_max->size(), 1u);
}

TEST(ByteSizeTest, ParsesAndFormats) {
  EXPECT_EQ(*ParseByteSize("8"), 8u);
  EXPECT_EQ(*ParseByteSize("8B"), 8u);
  EXPECT_EQ(*ParseByteSize("64K"), 65536u);
  EXPECT_EQ(*ParseByteSize("128M"), 128u << 20);
  EXPECT_EQ(*ParseByteSize("1G"), 1ULL << 30);
  EXPECT_EQ(*ParseByteSize("1GiB"), 1ULL << 30);
  EXPECT_EQ(*ParseByteSize("2gb"), 2ULL << 30);
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("G").ok());
  EXPECT_FALSE(ParseByteSize("1X").ok());
  EXPECT_FALSE(ParseByteSize("-1").ok());
  EXPECT_EQ(FormatByteSize(1ULL << 30), "1G");
  EXPECT_EQ(FormatByteSize(256ULL << 20), "256M");
  EXPECT_EQ(FormatByteSize(1536), "1536");
  EXPECT_EQ(FormatByteSize(8), "8");
}

TEST(NcclVersionTest, DecodesBothEncodings) {
  EXPECT_EQ(NcclVersion::FromCode(2804).ToString(), "2.8.4");    // <= 2.8: X*1000
  EXPECT_EQ(NcclVersion::FromCode(21801).ToString(), "2.18.1");  // >= 2.9: X*10000
  EXPECT_EQ(NcclVersion::FromCode(22809).ToString(), "2.28.9");
  EXPECT_LT(NcclVersion::FromCode(21602), *NcclVersion::Parse("2.17.1"));
  EXPECT_GE(NcclVersion::FromCode(21701), *NcclVersion::Parse("2.17.1"));
  EXPECT_EQ(NcclVersion::Parse("2.18")->ToString(), "2.18.0");
  EXPECT_FALSE(NcclVersion::Parse("two").ok());
  EXPECT_FALSE(NcclVersion::Parse("2").ok());
}

}  // namespace
}  // namespace muster::probe
