#include "nccl_probe/report.h"

#include "gtest/gtest.h"
#include "nccl_probe/render.h"
#include "nccl_probe/verdict.h"

namespace muster::probe {
namespace {

ProbeReport Sample() {
  ProbeReport r;
  r.command = "nccl";
  r.libcuda = "libcuda.so.1";
  r.inventory = Inventory{"580.65.06", 13000, 1, {}};
  GpuInfo g;
  g.index = 0;
  g.cuda_index = 0;
  g.name = "NVIDIA H100 80GB HBM3";
  g.uuid = "GPU-1";
  g.pci_bus_id = "00000000:18:00.0";
  g.memory_total_bytes = 80ULL << 30;
  g.memory_used_bytes = 1ULL << 30;
  g.ecc = EccCounts{3, 0};
  g.processes.push_back({77, "python", 1ULL << 30, true});
  r.inventory->gpus.push_back(g);
  r.nccl = NcclResult{"2.28.9", 22809, 1, {{8, 2, 10.5, 0.0, 0.0}}};
  return r;
}

TEST(ReportTest, JsonRoundTrips) {
  ProbeReport r = Sample();
  Judge(ProbeOptions{}, &r);
  auto back = ReportFromJson(ReportToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ReportToJson(*back), ReportToJson(r));
  EXPECT_EQ(back->inventory->gpus[0].processes[0].pid, 77u);
  EXPECT_EQ(back->outcome, Outcome::kUnhealthy);
}

TEST(ReportTest, BadJsonIsDataLoss) {
  EXPECT_EQ(ReportFromJson("{").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReportFromJson("{}").status().code(), absl::StatusCode::kDataLoss);
}

TEST(ReportTest, TableShowsEverySection) {
  ProbeReport r = Sample();
  Judge(ProbeOptions{}, &r);
  const std::string table = RenderTable(r);
  EXPECT_NE(table.find("NVIDIA H100 80GB HBM3"), std::string::npos);
  EXPECT_NE(table.find("00000000:18:00.0"), std::string::npos);
  EXPECT_NE(table.find("3/0"), std::string::npos);
  EXPECT_NE(table.find("python"), std::string::npos);
  EXPECT_NE(table.find("NCCL 2.28.9"), std::string::npos);
  EXPECT_NE(table.find("result: unhealthy (exit 4)"), std::string::npos);
}

}  // namespace
}  // namespace muster::probe
