#include "nccl_probe/report.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace muster::probe {

using nlohmann::json;

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kHealthy:
      return "healthy";
    case Outcome::kProbeError:
      return "probe_error";
    case Outcome::kUsage:
      return "usage";
    case Outcome::kNoDriver:
      return "no_driver";
    case Outcome::kUnhealthy:
      return "unhealthy";
    case Outcome::kBelowThreshold:
      return "below_threshold";
    case Outcome::kNcclUnusable:
      return "nccl_unusable";
    case Outcome::kTimeout:
      return "timeout";
  }
  return "probe_error";
}

namespace {

template <typename T>
json Nullable(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <typename T>
std::optional<T> OptionalField(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<T>();
}

json GpuToJson(const GpuInfo& g) {
  json procs = json::array();
  for (const GpuProcess& p : g.processes) {
    procs.push_back({{"pid", p.pid},
                     {"name", p.name},
                     {"used_bytes", Nullable(p.used_bytes)},
                     {"alive", p.alive}});
  }
  json ecc = nullptr;
  if (g.ecc) ecc = {{"corrected", g.ecc->corrected}, {"uncorrected", g.ecc->uncorrected}};
  return {{"index", g.index},
          {"cuda_index", Nullable(g.cuda_index)},
          {"name", g.name},
          {"uuid", g.uuid},
          {"pci_bus_id", g.pci_bus_id},
          {"memory", {{"total_bytes", g.memory_total_bytes}, {"used_bytes", g.memory_used_bytes}}},
          {"ecc", ecc},
          {"processes", procs},
          {"health", g.health},
          {"error", g.error.empty() ? json(nullptr) : json(g.error)}};
}

GpuInfo GpuFromJson(const json& j) {
  GpuInfo g;
  g.index = j.at("index").get<int>();
  g.cuda_index = OptionalField<int>(j, "cuda_index");
  g.name = j.at("name").get<std::string>();
  g.uuid = j.at("uuid").get<std::string>();
  g.pci_bus_id = j.at("pci_bus_id").get<std::string>();
  g.memory_total_bytes = j.at("memory").at("total_bytes").get<uint64_t>();
  g.memory_used_bytes = j.at("memory").at("used_bytes").get<uint64_t>();
  if (!j.at("ecc").is_null()) {
    g.ecc = EccCounts{j.at("ecc").at("corrected").get<uint64_t>(),
                      j.at("ecc").at("uncorrected").get<uint64_t>()};
  }
  for (const json& p : j.at("processes")) {
    g.processes.push_back({p.at("pid").get<uint32_t>(), p.at("name").get<std::string>(),
                           OptionalField<uint64_t>(p, "used_bytes"), p.at("alive").get<bool>()});
  }
  g.health = j.value("health", "");
  g.error = OptionalField<std::string>(j, "error").value_or("");
  return g;
}

}  // namespace

std::string ReportToJson(const ProbeReport& r, int indent) {
  json j = {{"schema_version", kReportSchemaVersion},
            {"command", r.command},
            {"status", OutcomeName(r.outcome)},
            {"exit_code", static_cast<int>(r.outcome)},
            {"problems", r.problems},
            {"error", r.error.empty() ? json(nullptr) : json(r.error)},
            {"failure", r.failure ? json(static_cast<int>(*r.failure)) : json(nullptr)},
            {"libraries", {{"cuda", r.libcuda}, {"nvml", r.libnvml}, {"nccl", r.libnccl}}}};
  j["driver"] = nullptr;
  j["gpu_count"] = nullptr;
  j["gpus"] = json::array();
  if (r.inventory) {
    j["driver"] = {{"version", r.inventory->driver_version},
                   {"cuda_version", r.inventory->cuda_driver_version}};
    j["gpu_count"] = r.inventory->cuda_device_count;
    for (const GpuInfo& g : r.inventory->gpus) j["gpus"].push_back(GpuToJson(g));
  }
  j["nccl"] = nullptr;
  if (r.nccl) {
    json rows = json::array();
    for (const BenchRow& b : r.nccl->rows) {
      rows.push_back({{"bytes", b.bytes},
                      {"count", b.count},
                      {"type", "float"},
                      {"redop", "sum"},
                      {"time_us", b.time_us},
                      {"algbw_gbps", b.algbw_gbps},
                      {"busbw_gbps", b.busbw_gbps}});
    }
    j["nccl"] = {{"version", r.nccl->version},
                 {"version_code", r.nccl->version_code},
                 {"ranks", r.nccl->ranks},
                 {"min_busbw_gbps", Nullable(r.min_busbw_gbps)},
                 {"check_from_bytes", r.check_from_bytes},
                 {"all_reduce", rows}};
  }
  return j.dump(indent);
}

absl::StatusOr<ProbeReport> ReportFromJson(const std::string& text) {
  try {
    json j = json::parse(text);
    ProbeReport r;
    r.command = j.at("command").get<std::string>();
    r.problems = j.at("problems").get<std::vector<std::string>>();
    r.error = OptionalField<std::string>(j, "error").value_or("");
    if (auto f = OptionalField<int>(j, "failure")) r.failure = static_cast<Outcome>(*f);
    r.outcome = static_cast<Outcome>(j.at("exit_code").get<int>());
    r.libcuda = j.at("libraries").at("cuda").get<std::string>();
    r.libnvml = j.at("libraries").at("nvml").get<std::string>();
    r.libnccl = j.at("libraries").at("nccl").get<std::string>();
    if (!j.at("driver").is_null()) {
      Inventory inv;
      inv.driver_version = j.at("driver").at("version").get<std::string>();
      inv.cuda_driver_version = j.at("driver").at("cuda_version").get<int>();
      inv.cuda_device_count = j.at("gpu_count").get<int>();
      for (const json& g : j.at("gpus")) inv.gpus.push_back(GpuFromJson(g));
      r.inventory = std::move(inv);
    }
    if (!j.at("nccl").is_null()) {
      const json& n = j.at("nccl");
      NcclResult nccl;
      nccl.version = n.at("version").get<std::string>();
      nccl.version_code = n.at("version_code").get<int>();
      nccl.ranks = n.at("ranks").get<int>();
      for (const json& b : n.at("all_reduce")) {
        nccl.rows.push_back({b.at("bytes").get<uint64_t>(), b.at("count").get<uint64_t>(),
                             b.at("time_us").get<double>(), b.at("algbw_gbps").get<double>(),
                             b.at("busbw_gbps").get<double>()});
      }
      r.min_busbw_gbps = OptionalField<double>(n, "min_busbw_gbps");
      r.check_from_bytes = n.at("check_from_bytes").get<uint64_t>();
      r.nccl = std::move(nccl);
    }
    return r;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("probe report is not valid JSON: ", e.what()));
  }
}

}  // namespace muster::probe
