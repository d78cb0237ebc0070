#include "agent/health/health_checks.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "agent/diagnostics/gpu_probe.h"
#include "base/duration.h"
#include "launch/captured_run.h"

namespace muster {
namespace {

std::string MebiBytes(uint64_t bytes) { return absl::StrCat(bytes >> 20, " MiB"); }

// The last non-empty line of a check's output, for the one-line reason.
std::string LastLine(std::string out) {
  absl::StripTrailingAsciiWhitespace(&out);
  size_t nl = out.rfind('\n');
  std::string line = nl == std::string::npos ? out : out.substr(nl + 1);
  constexpr size_t kMaxLine = 200;
  if (line.size() > kMaxLine) line = line.substr(line.size() - kMaxLine);
  return line;
}

}  // namespace

std::string CheckFreeSpace(const std::string& dir, uint64_t min_free) {
  if (min_free == 0 || dir.empty()) return "";
  struct statvfs fs;
  if (statvfs(dir.c_str(), &fs) != 0) {
    return absl::StrCat("cannot read the free space of ", dir, ": ", std::strerror(errno));
  }
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes >= min_free) return "";
  return absl::StrCat("only ", MebiBytes(free_bytes), " free in ", dir,
                      " (--health-min-free-space ", MebiBytes(min_free), ")");
}

CommandVerdict RunHealthCommand(const std::string& command, absl::Duration timeout,
                                const std::map<std::string, std::string>& env) {
  SpawnSpec spec{.argv = {"/bin/sh", "-c", command}};
  for (const auto& [k, v] : env) spec.env.push_back(absl::StrCat(k, "=", v));
  absl::StatusOr<HelperChild> child = StartHelper(std::move(spec), HelperOutput::kStdoutAndStderr);
  if (!child.ok()) {
    return {.excluded = absl::StrCat("--health-check could not start: ", child.status().message())};
  }
  std::vector<HelperChild> children;
  children.push_back(*std::move(child));
  // The output is read to its end (a chatty check must not block on a full pipe); the tail
  // is what is kept.
  HelperResult run = std::move(AwaitHelpers(std::move(children), absl::Now() + timeout,
                                            AwaitOptions{.max_output = 1 << 20})[0]);
  CommandVerdict v;
  v.output = run.out.size() > kMaxHealthOutput ? run.out.substr(run.out.size() - kMaxHealthOutput)
                                               : std::move(run.out);
  const std::string said = LastLine(v.output);
  const std::string tail = said.empty() ? "" : absl::StrCat(": ", said);
  if (!run.error.ok()) {
    v.excluded = absl::StrCat("--health-check could not be read: ", run.error.message());
  } else if (run.timed_out) {
    v.excluded = absl::StrCat("--health-check did not finish within ", HumanDuration(timeout),
                              " (--health-check-timeout)", tail);
  } else if (!run.exit) {
    v.excluded = "--health-check was reaped elsewhere; its exit is unknown";
  } else if (run.exit->code() != 0) {
    v.excluded = absl::StrCat("--health-check ", run.exit->Describe(), tail);
  }
  return v;
}

std::string CheckGpus(const std::string& binary, int expected_gpus, absl::Duration timeout,
                      const std::map<std::string, std::string>& env) {
  if (binary.empty()) return "";
  absl::StatusOr<ProbeResult> probe = RunProbe(binary, "inventory", timeout, env);
  if (!probe.ok()) return absl::StrCat("GPU probe failed: ", probe.status().message());
  if (probe->exit_code != 0) {
    return absl::StrCat("GPU probe exited ", probe->exit_code, probe->problems.empty() ? "" : ": ",
                        absl::StrJoin(probe->problems, "; "));
  }
  if (probe->gpu_count < expected_gpus) {
    return absl::StrCat("GPU probe found ", probe->gpu_count, " GPUs, ", expected_gpus,
                        " at the agent's start");
  }
  std::vector<std::string> stale;
  for (const GpuHolder& h : probe->holders) {
    if (h.alive)
      stale.push_back(absl::StrCat("GPU ", h.gpu, " held by pid ", h.pid, " (", h.name, ")"));
  }
  if (!stale.empty()) {
    return absl::StrCat("stale processes on GPUs between rounds: ", absl::StrJoin(stale, ", "));
  }
  return "";
}

}  // namespace muster
