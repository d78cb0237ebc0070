// Judges a ProbeReport: sets each GPU's health, the list of problems and the
// outcome (= exit code). Pure; runs in the parent on what the child found.
//
// GPU health: "error" (a query failed), "ecc" (uncorrected volatile ECC
// errors), "stale" (held by a pid that no longer exists: leaked context),
// "busy" (held by a live process; allowed with --allow-busy), else "ok".
// When several outcomes apply the most fundamental wins:
// no_driver > timeout > probe_error > unhealthy > nccl_unusable >
// below_threshold > healthy.
#ifndef MUSTER_NCCL_PROBE_VERDICT_H_
#define MUSTER_NCCL_PROBE_VERDICT_H_

#include "nccl_probe/options.h"
#include "nccl_probe/report.h"

namespace muster::probe {

void Judge(const ProbeOptions& options, ProbeReport* report);

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_VERDICT_H_
