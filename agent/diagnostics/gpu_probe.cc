#include "agent/diagnostics/gpu_probe.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/host_info.h"
#include "base/duration.h"
#include "base/exit_codes.h"
#include "base/log_format.h"
#include "base/status_macros.h"
#include "launch/captured_run.h"
#include "launch/spawner.h"
#include "spdlog/spdlog.h"

namespace muster {

std::string FindProbeBinary() {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, n);
    dir.resize(dir.rfind('/'));
    std::string sibling = dir + "/muster-probe";
    if (access(sibling.c_str(), X_OK) == 0) return sibling;
  }
  const char* path = getenv("PATH");
  absl::StatusOr<std::string> found = ResolveExecutable("muster-probe", path ? path : "");
  return found.ok() ? *found : "";
}

namespace {

// The report is another program's output: a field may be missing or null (a probe that
// timed out knows no GPU count). Never throw on it.
int IntField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int>() : 0;
}
std::string StringField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}
const nlohmann::json& ArrayField(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : kEmpty;
}

}  // namespace

absl::StatusOr<ProbeResult> RunProbe(const std::string& binary, const std::string& mode,
                                     absl::Duration timeout,
                                     const std::map<std::string, std::string>& env) {
  SpawnSpec spec;
  spec.argv = {binary, mode, "--json", "--timeout", HumanDuration(timeout)};
  for (const auto& [k, v] : env) spec.env.push_back(absl::StrCat(k, "=", v));
  std::vector<HelperChild> probe;
  ASSIGN_OR_RETURN(probe.emplace_back(), StartHelper(std::move(spec)));
  const pid_t pid = probe[0].pid;
  // The probe enforces its own deadline; ours is a second line of defence. A probe stuck
  // in the kernel after SIGKILL gets 5 s, then the agent's reaper takes it later.
  HelperResult run =
      std::move(AwaitHelpers(std::move(probe), absl::Now() + timeout + absl::Seconds(5),
                             AwaitOptions{.kill_grace = absl::Seconds(5)})[0]);
  if (!run.error.ok()) return run.error;
  if (run.timed_out && run.output_ended) {
    return absl::DeadlineExceededError(
        absl::StrCat("muster-probe (pid ", pid, ") closed its output but did not exit"));
  }
  if (run.timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat("muster-probe did not finish within ", HumanDuration(timeout)));
  }
  if (!run.exit) return absl::UnknownError("muster-probe was reaped elsewhere");
  ProbeResult result;
  result.exit_code = run.exit->code();
  result.report = nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  if (result.report.is_discarded() || !result.report.is_object()) {
    return absl::InternalError(
        absl::StrCat("muster-probe exited ", result.exit_code, " without a JSON report"));
  }
  result.gpu_count = IntField(result.report, "gpu_count");
  for (const auto& problem : ArrayField(result.report, "problems")) {
    if (problem.is_string()) result.problems.push_back(problem.get<std::string>());
  }
  for (const auto& gpu : ArrayField(result.report, "gpus")) {
    if (!gpu.is_object()) continue;
    for (const auto& proc : ArrayField(gpu, "processes")) {
      if (!proc.is_object()) continue;
      auto alive = proc.find("alive");
      result.holders.push_back(
          GpuHolder{.gpu = IntField(gpu, "index"),
                    .pid = IntField(proc, "pid"),
                    .name = StringField(proc, "name"),
                    .alive = alive != proc.end() && alive->is_boolean() && *alive});
    }
  }
  return result;
}

int ApplyProbe(const std::map<std::string, std::string>& env, const Config& c, int* nproc,
               nlohmann::json* report) {
  auto unresolved_gpu = [&] {
    if (*nproc != 0) return 0;
    spdlog::error(
        "--nproc-per-node gpu: no GPU found (no working NVIDIA driver); give a number "
        "or 'cpu'");
    return exit_code::kUsage;
  };
  if (c.probe == ProbeMode::kOff) return unresolved_gpu();
  std::string binary = FindProbeBinary();
  if (binary.empty()) {
    if (c.probe == ProbeMode::kAuto) return unresolved_gpu();
    spdlog::error("--probe {}: muster-probe is neither next to muster nor in PATH",
                  ModeName(c.probe));
    return exit_code::kUsage;
  }
  if (c.probe == ProbeMode::kAuto && !DriverMayBePresent(env)) return unresolved_gpu();
  std::string mode = c.probe == ProbeMode::kNccl ? "nccl" : "inventory";
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<ProbeResult> r = RunProbe(binary, mode, c.probe_timeout, env);
    if (!r.ok()) {
      spdlog::error("GPU probe failed: {}; this node is not usable", r.status().message());
      return exit_code::kTransient;
    }
    *report = r->report;
    if (r->exit_code == 3) {  // no driver
      if (c.probe != ProbeMode::kAuto) {
        spdlog::warn("--probe {}: no NVIDIA driver found", ModeName(c.probe));
      }
      return unresolved_gpu();
    }
    if (c.nproc_spec == "gpu" || c.nproc_spec == "auto") {
      if (r->gpu_count == 0 && c.nproc_spec == "gpu") {
        spdlog::error("--nproc-per-node gpu: the GPU probe found no GPU");
        return exit_code::kUsage;
      }
      if (r->gpu_count > 0) *nproc = r->gpu_count;
    }
    std::vector<std::string> held;
    std::vector<int> alive;
    for (const GpuHolder& h : r->holders) {
      held.push_back(absl::StrCat("GPU ", h.gpu, " by pid ", h.pid,
                                  h.name.empty() ? "" : absl::StrCat(" ", h.name),
                                  h.alive ? "" : " (no longer exists)"));
      if (h.alive) alive.push_back(h.pid);
    }
    if (held.empty()) {
      bool healthy = r->exit_code == 0;
      if (!healthy) {
        spdlog::error("GPU probe: this node is unhealthy (exit {}): {}", r->exit_code,
                      absl::StrJoin(r->problems, "; "));
        return exit_code::kTransient;
      }
      spdlog::info("GPU probe: {} GPU{} healthy", r->gpu_count, r->gpu_count == 1 ? "" : "s");
      return 0;
    }
    std::string what = absl::StrJoin(held, ", ");
    bool killed_already = c.stale_gpu_policy == StaleGpuPolicy::kKill && attempt > 0;
    if (c.stale_gpu_policy == StaleGpuPolicy::kFail || killed_already || attempt >= 30) {
      spdlog::error(
          "GPUs are held by processes that are not this job's: {}; refusing to start "
          "(--stale-gpu-policy {})",
          what, ModeName(c.stale_gpu_policy));
      return exit_code::kTransient;
    }
    if (c.stale_gpu_policy == StaleGpuPolicy::kKill) {
      for (int pid : alive) {
        spdlog::warn("--stale-gpu-policy kill: SIGKILL to pid {} holding a GPU", pid);
        kill(pid, SIGKILL);  // ESRCH: gone meanwhile; EPERM: not ours to kill, re-probe says
      }
    } else {
      spdlog::info("--stale-gpu-policy wait: {}; probing again in 10 s", what);
    }
    // NVML offers no event for a process releasing a GPU: re-probing is the only way.
    sleep(c.stale_gpu_policy == StaleGpuPolicy::kKill ? 1 : 10);
  }
}

std::string ProbeLine(const nlohmann::json& report) {
  if (!report.is_object()) return "";
  int code = report.value("exit_code", -1);
  if (code == 3) return "no NVIDIA driver";
  const nlohmann::json& gpus = report.contains("gpus") && report["gpus"].is_array()
                                   ? report["gpus"]
                                   : nlohmann::json::array();
  std::string line;
  if (gpus.empty()) {
    line = "0 GPUs";
  } else {
    std::string name = gpus[0].is_object() ? gpus[0].value("name", "?") : "?";
    bool same = std::all_of(gpus.begin(), gpus.end(), [&](const nlohmann::json& g) {
      return g.is_object() && g.value("name", "?") == name;
    });
    line = absl::StrCat(gpus.size(), " x ", same ? name : "mixed GPUs");
  }
  if (report.contains("driver") && report["driver"].is_object()) {
    absl::StrAppend(&line, ", driver ", report["driver"].value("version", "?"));
  }
  for (const nlohmann::json& g : gpus) {
    if (!g.is_object() || g.value("health", "ok") == "ok") continue;
    absl::StrAppend(&line, ", unhealthy GPU ", g.value("index", -1), ": ", g.value("health", "?"));
  }
  if (code != 0 && code != 3) absl::StrAppend(&line, " (probe exit ", code, ")");
  return line;
}

}  // namespace muster
