// muster-probe: finds bad GPU nodes before training starts. The probing runs
// in a child with a deadline (probe_child.h); this process only parses flags,
// judges the child's report and prints it. Exit codes: report.h / README.md.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nccl_probe/options.h"
#include "nccl_probe/probe.h"
#include "nccl_probe/probe_child.h"
#include "nccl_probe/render.h"
#include "nccl_probe/report.h"
#include "nccl_probe/verdict.h"

namespace muster::probe {
namespace {

ProbeReport ReportForChildFailure(const ProbeOptions& options, const absl::Status& status) {
  ProbeReport report;
  report.command = options.command == Command::kNccl ? "nccl" : "inventory";
  report.libcuda = options.libcuda;
  report.libnvml = options.libnvml;
  report.libnccl = options.libnccl;
  report.failure = absl::IsDeadlineExceeded(status) ? Outcome::kTimeout : Outcome::kProbeError;
  report.error = std::string(status.message());
  return report;
}

int Main(int argc, char** argv) {
  absl::StatusOr<ProbeOptions> options =
      ParseProbeArgs(std::vector<std::string>(argv + 1, argv + argc),
                     [](const char* name) { return std::getenv(name); });
  if (!options.ok()) {
    std::fprintf(stderr, "muster-probe: %s\n%s", std::string(options.status().message()).c_str(),
                 ProbeUsage().c_str());
    return static_cast<int>(Outcome::kUsage);
  }
  if (options->help) {
    std::fputs(ProbeUsage().c_str(), stdout);
    return 0;
  }
  if (options->version) {
    std::printf("muster-probe %s\n", MUSTER_VERSION);
    return 0;
  }
  absl::StatusOr<std::string> payload =
      RunInChild([&](const StageFn& stage) { return ReportToJson(RunProbe(*options, stage), -1); },
                 options->timeout);
  absl::StatusOr<ProbeReport> report =
      payload.ok() ? ReportFromJson(*payload) : absl::StatusOr<ProbeReport>(payload.status());
  ProbeReport judged =
      report.ok() ? *std::move(report) : ReportForChildFailure(*options, report.status());
  Judge(*options, &judged);
  const std::string out = options->json ? ReportToJson(judged) + "\n" : RenderTable(judged);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return static_cast<int>(judged.outcome);
}

}  // namespace
}  // namespace muster::probe

int main(int argc, char** argv) { return muster::probe::Main(argc, argv); }
