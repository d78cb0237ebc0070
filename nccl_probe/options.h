// muster-probe's command line: `muster-probe [inventory|nccl] [flags]`.
// Flags accept `--name value` and `--name=value`, dashes or underscores.
// Library paths fall back to MUSTER_LIBCUDA / MUSTER_LIBNVML / MUSTER_LIBNCCL,
// then the sonames. Plain data; parsing is a pure function.
#ifndef MUSTER_NCCL_PROBE_OPTIONS_H_
#define MUSTER_NCCL_PROBE_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nccl_probe/nccl_version.h"

namespace muster::probe {

enum class Command { kInventory, kNccl };

struct ProbeOptions {
  Command command = Command::kInventory;
  bool json = false;
  bool help = false;
  bool version = false;  // --version
  std::string libcuda = "libcuda.so.1";
  std::string libnvml = "libnvidia-ml.so.1";
  std::string libnccl = "libnccl.so.2";
  absl::Duration timeout = absl::Seconds(30);
  // All-reduce sweep (nccl-tests' -b -e -f -w -n).
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 1ULL << 30;
  uint64_t step_factor = 2;
  int warmup_iters = 5;
  int iters = 20;
  // Pass/fail: busbw (GB/s) at every size >= check_from_bytes (default: the
  // largest size only; small messages are latency-bound).
  std::optional<double> min_busbw_gbps;
  std::optional<uint64_t> check_from_bytes;
  NcclVersion min_nccl_version;
  // A GPU used by a live process is "busy": unhealthy unless --allow-busy.
  bool allow_busy = false;
};

using EnvLookup = std::function<const char*(const char*)>;

// args excludes argv[0]. InvalidArgument names the offending flag.
absl::StatusOr<ProbeOptions> ParseProbeArgs(const std::vector<std::string>& args,
                                            const EnvLookup& env);

std::string ProbeUsage();

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_OPTIONS_H_
