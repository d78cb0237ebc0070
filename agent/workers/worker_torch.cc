#include "agent/workers/worker_torch.h"

#include <fcntl.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/unique_fd.h"
#include "launch/captured_run.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// Prints torch's __version__ as version.py writes it, or nothing: find_spec imports no
// part of torch (a parent package would be imported, and torch has none).
constexpr char kFindTorchVersion[] =
    "import importlib.util, os, re\n"
    "spec = importlib.util.find_spec('torch')\n"
    "path = spec and spec.origin and os.path.join(os.path.dirname(spec.origin), 'version.py')\n"
    "if path and os.path.exists(path):\n"
    "    m = re.search(r\"__version__\\s*=\\s*['\\\"]([^'\\\"]+)\", open(path).read())\n"
    "    print(m.group(1) if m else '')\n";

bool IsPythonName(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  if (!name.starts_with("python")) return false;
  // python, python3, python3.11: nothing but digits and dots after the name.
  return name.find_first_not_of("0123456789.", 6) == std::string::npos;
}

}  // namespace

std::string WorkerInterpreter(const Config& config) {
  if (!config.no_python) return config.python_exec;
  if (!config.command.empty() && IsPythonName(config.command[0])) return config.command[0];
  return "";
}

std::optional<TorchVersion> FindWorkerTorch(const std::map<std::string, std::string>& worker_env,
                                            const std::string& python, absl::Duration timeout) {
  if (python.empty()) return std::nullopt;
  SpawnSpec spec;
  spec.argv = {python, "-c", kFindTorchVersion};
  // What the interpreter may say on stderr (a site warning) is no part of the job's output.
  UniqueFd devnull(open("/dev/null", O_WRONLY | O_CLOEXEC));
  if (devnull.get() >= 0) spec.fds.push_back({devnull.get(), 2});  // else: stderr as it is
  for (const auto& [k, v] : worker_env) {
    if (k != "MUSTER_TOKEN") spec.env.push_back(absl::StrCat(k, "=", v));
  }
  absl::StatusOr<CapturedRun> run = RunCaptured(std::move(spec), timeout);
  if (!run.ok() || run->exit_code != 0) {
    spdlog::debug("the workers' torch version is unknown ({} -c ...: {})", python,
                  run.ok() ? absl::StrCat("exit ", run->exit_code) : run.status().ToString());
    return std::nullopt;
  }
  std::string text(absl::StripAsciiWhitespace(run->out));
  std::optional<TorchVersion> version = ParseTorchVersion(text);
  spdlog::debug("the workers' torch ({}): {}", python, text.empty() ? "none" : text);
  return version;
}

}  // namespace muster
