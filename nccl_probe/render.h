// The human form of a judged ProbeReport: a GPU table, a process table, the
// nccl-tests-style all-reduce table, then the verdict with its problems. The
// JSON form is ReportToJson (report.h). Pure; thread-safe.
#ifndef MUSTER_NCCL_PROBE_RENDER_H_
#define MUSTER_NCCL_PROBE_RENDER_H_

#include <string>

#include "nccl_probe/report.h"

namespace muster::probe {

std::string RenderTable(const ProbeReport& report);

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_RENDER_H_
