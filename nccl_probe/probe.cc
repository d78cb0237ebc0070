#include "nccl_probe/probe.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "nccl_probe/bandwidth.h"
#include "nccl_probe/driver_api.h"
#include "nccl_probe/inventory.h"
#include "nccl_probe/nccl_version.h"

namespace muster::probe {
namespace {

void Fail(ProbeReport* report, Outcome outcome, std::string error) {
  report->failure = outcome;
  report->error = std::move(error);
}

// A library that cannot be opened means no driver (or no NCCL); one that
// opens but lacks a symbol is a probe error naming the symbol.
Outcome LoadFailure(const absl::Status& status, Outcome when_absent) {
  return absl::IsNotFound(status) ? when_absent : Outcome::kProbeError;
}

void RunNccl(const ProbeOptions& options, const CudaApi& cuda, int ranks, const StageFn& stage,
             ProbeReport* report) {
  stage(absl::StrCat("dlopen ", options.libnccl));
  absl::StatusOr<std::unique_ptr<NcclApi>> nccl = NcclApi::Load(options.libnccl);
  if (!nccl.ok()) {
    Fail(report, LoadFailure(nccl.status(), Outcome::kNcclUnusable),
         absl::IsNotFound(nccl.status()) ? absl::StrCat("NCCL not found: ", nccl.status().message())
                                         : std::string(nccl.status().message()));
    return;
  }
  int code = 0;
  if (absl::Status s = (*nccl)->Check((*nccl)->ncclGetVersion(&code), "ncclGetVersion"); !s.ok()) {
    Fail(report, Outcome::kProbeError, std::string(s.message()));
    return;
  }
  const NcclVersion version = NcclVersion::FromCode(code);
  report->nccl = NcclResult{version.ToString(), code, ranks, {}};
  if (version < options.min_nccl_version) {
    Fail(report, Outcome::kNcclUnusable,
         absl::StrCat("NCCL ", version.ToString(), " is older than required ",
                      options.min_nccl_version.ToString()));
    return;
  }
  absl::StatusOr<std::vector<uint64_t>> sizes =
      MessageSizes(options.min_bytes, options.max_bytes, options.step_factor);
  if (!sizes.ok()) {
    Fail(report, Outcome::kProbeError, std::string(sizes.status().message()));
    return;
  }
  BenchOptions bench{*sizes, options.warmup_iters, options.iters};
  absl::StatusOr<std::vector<BenchRow>> rows = RunAllReduceBench(cuda, **nccl, ranks, bench, stage);
  if (!rows.ok()) {
    Fail(report, Outcome::kProbeError, absl::StrCat("all-reduce: ", rows.status().message()));
    return;
  }
  report->nccl->rows = *std::move(rows);
}

}  // namespace

ProbeReport RunProbe(const ProbeOptions& options, const StageFn& stage) {
  ProbeReport report;
  report.command = options.command == Command::kNccl ? "nccl" : "inventory";
  report.libcuda = options.libcuda;
  report.libnvml = options.libnvml;
  report.libnccl = options.libnccl;

  stage(absl::StrCat("dlopen ", options.libcuda));
  absl::StatusOr<std::unique_ptr<CudaApi>> cuda = CudaApi::Load(options.libcuda);
  if (!cuda.ok()) {
    Fail(&report, LoadFailure(cuda.status(), Outcome::kNoDriver),
         std::string(cuda.status().message()));
    return report;
  }
  stage(absl::StrCat("dlopen ", options.libnvml));
  absl::StatusOr<std::unique_ptr<NvmlApi>> nvml = NvmlApi::Load(options.libnvml);
  if (!nvml.ok()) {
    Fail(&report, LoadFailure(nvml.status(), Outcome::kNoDriver),
         std::string(nvml.status().message()));
    return report;
  }

  stage("cuInit");
  const abi::CUresult init = (*cuda)->cuInit(0);
  const bool cuda_ok = init == abi::kCudaSuccess;
  if (!cuda_ok && init != abi::kCudaErrorNoDevice) {
    // The driver is installed but broken (version mismatch, GPU fallen off
    // the bus, ...): the node must not run training. NVML may still say why.
    Fail(&report, Outcome::kUnhealthy, absl::StrCat("cuInit failed: ", (*cuda)->ErrorName(init)));
  }
  stage("nvmlInit");
  if (absl::Status s = (*nvml)->Check((*nvml)->nvmlInit_v2(), "nvmlInit_v2"); !s.ok()) {
    if (!report.failure) Fail(&report, Outcome::kUnhealthy, std::string(s.message()));
    return report;
  }
  stage("inventory");
  absl::StatusOr<Inventory> inventory = CollectInventory(**cuda, **nvml, cuda_ok, PidExists);
  (*nvml)->nvmlShutdown();
  if (!inventory.ok()) {
    if (!report.failure)
      Fail(&report, Outcome::kProbeError, std::string(inventory.status().message()));
    return report;
  }
  report.inventory = *std::move(inventory);
  if (options.command == Command::kNccl && !report.failure) {
    if (report.inventory->cuda_device_count < 1) {
      Fail(&report, Outcome::kProbeError, "nccl: no CUDA device to all-reduce over");
    } else {
      RunNccl(options, **cuda, report.inventory->cuda_device_count, stage, &report);
    }
  }
  return report;
}

}  // namespace muster::probe
