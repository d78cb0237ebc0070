// What one probe run found: plain data, filled by the probing child, judged
// by the parent (verdict.h), rendered as a table or JSON (render.h). The JSON
// form is the stable contract documented in nccl_probe/README.md ("schema_version").
#ifndef MUSTER_NCCL_PROBE_REPORT_H_
#define MUSTER_NCCL_PROBE_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace muster::probe {

inline constexpr int kReportSchemaVersion = 1;

// Exit codes of muster-probe; also the report's "status".
enum class Outcome {
  kHealthy = 0,
  kProbeError = 1,      // the probe could not finish: missing symbol, crash
  kUsage = 2,           // invalid flags (same code as `muster run`)
  kNoDriver = 3,        // libcuda.so.1 / libnvidia-ml.so.1 not loadable
  kUnhealthy = 4,       // cuInit failed, ECC errors, a GPU held or erroring
  kBelowThreshold = 5,  // all-reduce busbw under --min-busbw
  kNcclUnusable = 6,    // libnccl.so.2 missing or older than required
  kTimeout = 7,         // the probe hung (driver) and was killed
};
// "healthy", "probe_error", ... as in the JSON.
const char* OutcomeName(Outcome outcome);

struct GpuProcess {
  uint32_t pid = 0;
  std::string name;                    // "" when NVML could not tell
  std::optional<uint64_t> used_bytes;  // nullopt: not available
  bool alive = false;                  // the pid exists in our PID namespace
};

struct EccCounts {  // volatile counters (since the last driver reload)
  uint64_t corrected = 0;
  uint64_t uncorrected = 0;
};

struct GpuInfo {
  int index = 0;                  // NVML index (all GPUs of the node)
  std::optional<int> cuda_index;  // ordinal seen by CUDA, if visible
  std::string name;
  std::string uuid;
  std::string pci_bus_id;  // "00000000:18:00.0"
  uint64_t memory_total_bytes = 0;
  uint64_t memory_used_bytes = 0;
  std::optional<EccCounts> ecc;  // nullopt: ECC not supported / disabled
  std::vector<GpuProcess> processes;
  std::string error;   // a query on this GPU failed (e.g. GPU is lost)
  std::string health;  // set by the verdict: ok, busy, stale, ecc, error
};

struct Inventory {
  std::string driver_version;   // NVML, "580.65.06"
  int cuda_driver_version = 0;  // cuDriverGetVersion, 13000 = 13.0
  int cuda_device_count = 0;    // what --nproc-per-node gpu uses
  std::vector<GpuInfo> gpus;
};

struct BenchRow {
  uint64_t bytes = 0;
  uint64_t count = 0;  // float elements
  double time_us = 0;  // per iteration
  double algbw_gbps = 0;
  double busbw_gbps = 0;
};

struct NcclResult {
  std::string version;  // "2.28.9"
  int version_code = 0;
  int ranks = 0;  // GPUs in the single-process communicator
  std::vector<BenchRow> rows;
};

struct ProbeReport {
  std::string command;  // "inventory" or "nccl"
  std::string libcuda, libnvml, libnccl;
  std::optional<Inventory> inventory;
  std::optional<NcclResult> nccl;
  // Set when the probe stopped early (or could not start a stage).
  std::optional<Outcome> failure;
  std::string error;
  // Set by Judge().
  Outcome outcome = Outcome::kHealthy;
  std::vector<std::string> problems;
  std::optional<double> min_busbw_gbps;
  uint64_t check_from_bytes = 0;
};

std::string ReportToJson(const ProbeReport& report, int indent = 2);
absl::StatusOr<ProbeReport> ReportFromJson(const std::string& text);

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_REPORT_H_
