#include "nccl_probe/render.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nccl_probe/bandwidth.h"

namespace muster::probe {
namespace {

std::string GiB(uint64_t bytes) { return absl::StrFormat("%.1f", bytes / double(1ULL << 30)); }

void RenderInventory(const Inventory& inv, std::string* out) {
  absl::StrAppendFormat(out, "driver %s, CUDA %d.%d, %d GPU(s) visible to CUDA, %d on the node\n",
                        inv.driver_version, inv.cuda_driver_version / 1000,
                        (inv.cuda_driver_version % 1000) / 10, inv.cuda_device_count,
                        inv.gpus.size());
  if (inv.gpus.empty()) return;
  absl::StrAppendFormat(out, "%4s %4s  %-24s %-40s %-16s %15s %11s  %s\n", "gpu", "cuda", "name",
                        "uuid", "pci bus id", "mem used/total", "ecc c/u", "health");
  for (const GpuInfo& g : inv.gpus) {
    const std::string ecc =
        g.ecc ? absl::StrCat(g.ecc->corrected, "/", g.ecc->uncorrected) : std::string("n/a");
    absl::StrAppendFormat(
        out, "%4d %4s  %-24s %-40s %-16s %11s GiB %11s  %s\n", g.index,
        g.cuda_index ? absl::StrCat(*g.cuda_index) : std::string("-"), g.name, g.uuid, g.pci_bus_id,
        absl::StrCat(GiB(g.memory_used_bytes), "/", GiB(g.memory_total_bytes)), ecc, g.health);
  }
  bool any = false;
  for (const GpuInfo& g : inv.gpus) {
    for (const GpuProcess& p : g.processes) {
      if (!any)
        absl::StrAppendFormat(out, "\n%4s %8s  %-24s %10s  %s\n", "gpu", "pid", "process", "memory",
                              "alive");
      any = true;
      absl::StrAppendFormat(out, "%4d %8d  %-24s %10s  %s\n", g.index, p.pid,
                            p.name.empty() ? "?" : p.name,
                            p.used_bytes ? absl::StrCat(*p.used_bytes >> 20, " MiB") : "n/a",
                            p.alive ? "yes" : "no (gone)");
    }
  }
}

void RenderNccl(const ProbeReport& r, std::string* out) {
  const NcclResult& n = *r.nccl;
  absl::StrAppendFormat(out, "\nNCCL %s, all-reduce over %d GPU(s) (ncclCommInitAll)\n", n.version,
                        n.ranks);
  if (n.rows.empty()) return;
  absl::StrAppendFormat(out, "#%12s %12s %6s %6s %10s %8s %8s\n", "size", "count", "type", "redop",
                        "time", "algbw", "busbw");
  absl::StrAppendFormat(out, "#%12s %12s %6s %6s %10s %8s %8s\n", "(B)", "(elements)", "", "",
                        "(us)", "(GB/s)", "(GB/s)");
  double sum = 0;
  for (const BenchRow& b : n.rows) {
    sum += b.busbw_gbps;
    absl::StrAppendFormat(out, " %12d %12d %6s %6s %10.2f %8.2f %8.2f\n", b.bytes, b.count, "float",
                          "sum", b.time_us, b.algbw_gbps, b.busbw_gbps);
  }
  absl::StrAppendFormat(out, "# avg bus bandwidth: %.2f GB/s\n", sum / n.rows.size());
  if (r.min_busbw_gbps) {
    if (n.ranks > 1) {
      absl::StrAppendFormat(out, "# threshold: busbw >= %.2f GB/s at sizes >= %s\n",
                            *r.min_busbw_gbps, FormatByteSize(r.check_from_bytes));
    } else {
      absl::StrAppendFormat(out, "# threshold not applied: busbw is 0 on a single GPU\n");
    }
  }
}

}  // namespace

std::string RenderTable(const ProbeReport& r) {
  std::string out = absl::StrCat("muster-probe ", r.command, "\n");
  if (r.inventory) RenderInventory(*r.inventory, &out);
  if (r.nccl) RenderNccl(r, &out);
  absl::StrAppendFormat(&out, "\nresult: %s (exit %d)\n", OutcomeName(r.outcome),
                        static_cast<int>(r.outcome));
  for (const std::string& p : r.problems) absl::StrAppend(&out, "  ", p, "\n");
  return out;
}

}  // namespace muster::probe
