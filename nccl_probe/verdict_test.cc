#include "nccl_probe/verdict.h"

#include "gtest/gtest.h"

namespace muster::probe {
namespace {

ProbeReport TwoGpus() {
  ProbeReport r;
  r.command = "nccl";
  r.inventory = Inventory{"580.65.06", 13000, 2, {}};
  for (int i = 0; i < 2; ++i) {
    GpuInfo g;
    g.index = i;
    g.ecc = EccCounts{};
    r.inventory->gpus.push_back(g);
  }
  return r;
}

TEST(VerdictTest, HealthyWhenNothingIsWrong) {
  ProbeReport r = TwoGpus();
  Judge(ProbeOptions{}, &r);
  EXPECT_EQ(r.outcome, Outcome::kHealthy);
  EXPECT_TRUE(r.problems.empty());
  EXPECT_EQ(r.inventory->gpus[0].health, "ok");
}

TEST(VerdictTest, StaleAndBusyAndEcc) {
  ProbeReport r = TwoGpus();
  r.inventory->gpus[0].processes.push_back({1234, "", uint64_t{1} << 30, false});
  r.inventory->gpus[1].processes.push_back({42, "python", std::nullopt, true});
  r.inventory->gpus[1].ecc->corrected = 7;  // corrected errors alone are fine
  Judge(ProbeOptions{}, &r);
  EXPECT_EQ(r.outcome, Outcome::kUnhealthy);
  EXPECT_EQ(r.inventory->gpus[0].health, "stale");
  EXPECT_EQ(r.inventory->gpus[1].health, "busy");
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_EQ(r.problems[0], "GPU 0: held by pid 1234 (1024 MiB), which no longer exists");
  EXPECT_EQ(r.problems[1], "GPU 1: in use by live pid 42 python");

  ProbeOptions allow;
  allow.allow_busy = true;
  ProbeReport busy_only = TwoGpus();
  busy_only.inventory->gpus[1].processes.push_back({42, "python", std::nullopt, true});
  Judge(allow, &busy_only);
  EXPECT_EQ(busy_only.outcome, Outcome::kHealthy);
  EXPECT_EQ(busy_only.inventory->gpus[1].health, "busy");

  ProbeReport ecc = TwoGpus();
  ecc.inventory->gpus[1].ecc->uncorrected = 2;
  Judge(ProbeOptions{}, &ecc);
  EXPECT_EQ(ecc.outcome, Outcome::kUnhealthy);
  EXPECT_EQ(ecc.inventory->gpus[1].health, "ecc");
}

TEST(VerdictTest, ThresholdNamesTheSlowSize) {
  ProbeReport r = TwoGpus();
  r.nccl = NcclResult{"2.28.9", 22809, 2, {}};
  r.nccl->rows.push_back({256ULL << 20, 64ULL << 20, 1000, 268, 90.0});
  r.nccl->rows.push_back({1ULL << 30, 256ULL << 20, 1000, 400, 400.0});
  ProbeOptions o;
  o.min_busbw_gbps = 300;
  Judge(o, &r);  // default: only the largest size is checked
  EXPECT_EQ(r.outcome, Outcome::kHealthy);
  o.check_from_bytes = 128ULL << 20;
  Judge(o, &r);
  EXPECT_EQ(r.outcome, Outcome::kBelowThreshold);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0], "all-reduce 256M: busbw 90.00 GB/s below --min-busbw 300.00 GB/s");
}

TEST(VerdictTest, OneGpuIsNotJudgedOnBusbw) {
  ProbeReport r = TwoGpus();
  r.nccl = NcclResult{"2.28.9", 22809, 1, {{1ULL << 30, 1ULL << 28, 10, 100, 0}}};
  ProbeOptions o;
  o.min_busbw_gbps = 300;
  Judge(o, &r);
  EXPECT_EQ(r.outcome, Outcome::kHealthy);
}

TEST(VerdictTest, PrecedenceFavoursTheMostFundamental) {
  ProbeReport r = TwoGpus();
  r.inventory->gpus[0].ecc->uncorrected = 1;
  r.failure = Outcome::kNcclUnusable;
  r.error = "NCCL 2.16.2 is older than required 2.17.1";
  Judge(ProbeOptions{}, &r);
  EXPECT_EQ(r.outcome, Outcome::kUnhealthy);
  EXPECT_EQ(r.problems.size(), 2u);

  ProbeReport none;
  none.failure = Outcome::kNoDriver;
  none.error = "dlopen libcuda.so.1: not found";
  Judge(ProbeOptions{}, &none);
  EXPECT_EQ(none.outcome, Outcome::kNoDriver);
  EXPECT_EQ(none.problems[0], "no NVIDIA driver found: dlopen libcuda.so.1: not found");
}

}  // namespace
}  // namespace muster::probe
