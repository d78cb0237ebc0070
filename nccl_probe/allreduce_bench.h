// Single-process all-reduce sweep over the node's GPUs, as nccl-tests'
// `all_reduce_perf -g N` runs it: one communicator per GPU from
// ncclCommInitAll, float sum, out-of-place, `warmup` untimed then `iters`
// timed iterations per size, wall time measured on the host around the
// iterations and a final stream synchronize. Bandwidths: bandwidth.h.
//
// Runs inside the probe child (probe_child.h) because a driver may hang or
// crash here. Single-threaded; owns every CUDA/NCCL resource it creates and
// releases them before returning.
#ifndef MUSTER_NCCL_PROBE_ALLREDUCE_BENCH_H_
#define MUSTER_NCCL_PROBE_ALLREDUCE_BENCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nccl_probe/driver_api.h"
#include "nccl_probe/report.h"

namespace muster::probe {

// Progress marker ("cuInit", "all-reduce 1G"): the parent names the stage a
// hung probe was killed in.
using StageFn = std::function<void(const std::string& stage)>;

struct BenchOptions {
  std::vector<uint64_t> sizes;  // bytes, each a multiple of sizeof(float)
  int warmup_iters = 5;
  int iters = 20;
};

// `ranks` CUDA ordinals 0..ranks-1 (cuInit done). Fills rows only; the caller
// sets the version fields.
absl::StatusOr<std::vector<BenchRow>> RunAllReduceBench(const CudaApi& cuda, const NcclApi& nccl,
                                                        int ranks, const BenchOptions& options,
                                                        const StageFn& stage);

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_ALLREDUCE_BENCH_H_
