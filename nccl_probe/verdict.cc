#include "nccl_probe/verdict.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nccl_probe/bandwidth.h"

namespace muster::probe {
namespace {

constexpr Outcome kPrecedence[] = {Outcome::kNoDriver,     Outcome::kTimeout,
                                   Outcome::kProbeError,   Outcome::kUnhealthy,
                                   Outcome::kNcclUnusable, Outcome::kBelowThreshold};

std::string ProcessLabel(const GpuProcess& p) {
  std::string label = absl::StrCat("pid ", p.pid);
  if (!p.name.empty()) absl::StrAppend(&label, " ", p.name);
  if (p.used_bytes) absl::StrAppend(&label, " (", *p.used_bytes >> 20, " MiB)");
  return label;
}

void JudgeGpu(const ProbeOptions& options, GpuInfo* gpu, std::set<Outcome>* found,
              std::vector<std::string>* problems) {
  const std::string who = absl::StrCat("GPU ", gpu->index);
  gpu->health = "ok";
  auto flag = [&](const char* health, std::string problem) {
    if (gpu->health == "ok") gpu->health = health;
    found->insert(Outcome::kUnhealthy);
    problems->push_back(absl::StrCat(who, ": ", problem));
  };
  if (!gpu->error.empty()) flag("error", gpu->error);
  if (gpu->ecc && gpu->ecc->uncorrected > 0) {
    flag("ecc", absl::StrCat(gpu->ecc->uncorrected, " uncorrected ECC errors"));
  }
  for (const GpuProcess& p : gpu->processes) {
    if (!p.alive)
      flag("stale", absl::StrCat("held by ", ProcessLabel(p), ", which no longer exists"));
  }
  for (const GpuProcess& p : gpu->processes) {
    if (p.alive && !options.allow_busy)
      flag("busy", absl::StrCat("in use by live ", ProcessLabel(p)));
  }
  if (gpu->health == "ok" && options.allow_busy && !gpu->processes.empty()) gpu->health = "busy";
}

}  // namespace

void Judge(const ProbeOptions& options, ProbeReport* report) {
  std::set<Outcome> found;
  report->problems.clear();
  if (report->failure) {
    found.insert(*report->failure);
    report->problems.push_back(*report->failure == Outcome::kNoDriver
                                   ? absl::StrCat("no NVIDIA driver found: ", report->error)
                                   : report->error);
  }
  if (report->inventory) {
    for (GpuInfo& gpu : report->inventory->gpus) JudgeGpu(options, &gpu, &found, &report->problems);
  }
  report->min_busbw_gbps = options.min_busbw_gbps;
  if (report->nccl && !report->nccl->rows.empty()) {
    const auto& rows = report->nccl->rows;
    report->check_from_bytes = options.check_from_bytes.value_or(
        std::max_element(rows.begin(), rows.end(), [](const BenchRow& a, const BenchRow& b) {
          return a.bytes < b.bytes;
        })->bytes);
    // busbw is 0 by definition on one GPU: there is no bus to judge.
    if (options.min_busbw_gbps && report->nccl->ranks > 1) {
      for (const BenchRow& row : rows) {
        if (row.bytes < report->check_from_bytes || row.busbw_gbps >= *options.min_busbw_gbps)
          continue;
        found.insert(Outcome::kBelowThreshold);
        report->problems.push_back(
            absl::StrFormat("all-reduce %s: busbw %.2f GB/s below --min-busbw %.2f GB/s",
                            FormatByteSize(row.bytes), row.busbw_gbps, *options.min_busbw_gbps));
      }
    }
  }
  report->outcome = Outcome::kHealthy;
  for (Outcome o : kPrecedence) {
    if (found.count(o)) {
      report->outcome = o;
      break;
    }
  }
}

}  // namespace muster::probe
