#include "agent/diagnostics/flight_recorder.h"

#include <dirent.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace muster {
namespace {

// torch 2.10 moved the flight recorder to TORCH_FR_* (2.2-2.9 read the TORCH_NCCL_ names;
// 2.15 still reads them and warns: "TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated").
constexpr TorchVersion kFlightRecorderNames = {2, 10};
constexpr RenamedVariable kBufferSize = {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE",
                                         kFlightRecorderNames};
constexpr RenamedVariable kDumpOnTimeout = {"TORCH_FR_DUMP_ON_TIMEOUT",
                                            "TORCH_NCCL_DUMP_ON_TIMEOUT", kFlightRecorderNames};
constexpr RenamedVariable kDumpFile = {"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                                       kFlightRecorderNames};

bool Has(const std::vector<std::string>& env, const char* name) {
  std::string prefix = absl::StrCat(name, "=");
  auto at = std::lower_bound(env.begin(), env.end(), prefix);
  return at != env.end() && at->starts_with(prefix);
}

void Insert(std::vector<std::string>* env, const char* name, const std::string& value) {
  std::string kv = absl::StrCat(name, "=", value);
  env->insert(std::lower_bound(env->begin(), env->end(), kv), std::move(kv));
}

}  // namespace

void AddFlightRecorderEnv(const std::string& attempt_dir, const std::optional<TorchVersion>& torch,
                          std::vector<std::string>* env) {
  const std::pair<RenamedVariable, std::string> settings[] = {
      {kBufferSize, "2000"},
      {kDumpOnTimeout, "1"},
      {kDumpFile, absl::StrCat(attempt_dir, "/", kFlightRecorderFilePrefix)},
  };
  for (const auto& [s, value] : settings) {
    if (Has(*env, s.name) || Has(*env, s.old_name)) continue;  // the user's choice wins
    for (const char* name : NamesFor(s, torch)) Insert(env, name, value);
  }
}

std::vector<std::string> FlightRecorderDumps(const std::string& attempt_dir) {
  std::vector<std::string> out;
  DIR* d = opendir(attempt_dir.c_str());
  if (d == nullptr) return out;  // ENOENT: no attempt directory, no traces
  while (dirent* e = readdir(d)) {
    std::string_view name = e->d_name;
    if (name.starts_with(kFlightRecorderFilePrefix)) out.push_back(attempt_dir + "/" + e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string FlightRecorderNote(const std::string& worker_dir) {
  size_t slash = worker_dir.rfind('/');
  if (worker_dir.empty() || slash == std::string::npos) return "";
  std::vector<std::string> dumps = FlightRecorderDumps(worker_dir.substr(0, slash));
  if (dumps.empty()) return "";
  return absl::StrCat(" (flight recorder traces: ", absl::StrJoin(dumps, ", "), ")");
}

}  // namespace muster
