// One probe run, in-process: load the libraries, cuInit/nvmlInit, inventory,
// and for `nccl` the version check and all-reduce sweep. Never throws or
// aborts on a driver error: what stopped it is in ProbeReport::failure/error.
// It can still hang or crash inside a driver, which is why muster-probe runs
// it in a child (probe_child.h). The verdict is the caller's (verdict.h).
#ifndef MUSTER_NCCL_PROBE_PROBE_H_
#define MUSTER_NCCL_PROBE_PROBE_H_

#include "nccl_probe/allreduce_bench.h"
#include "nccl_probe/options.h"
#include "nccl_probe/report.h"

namespace muster::probe {

ProbeReport RunProbe(const ProbeOptions& options, const StageFn& stage);

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_PROBE_H_
