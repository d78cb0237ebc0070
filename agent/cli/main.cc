// muster: the node agent's entry point. Dispatches subcommands and wires the
// layers. Invoked as `torchrun` (a symlink or copy of this binary by that name), it is
// `muster run`: every word is run's, parsed by torchrun's argument rules as run parses them.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/cli/dry_run.h"
#include "agent/cli/flags_reference.h"
#include "agent/cli/subcommands.h"
#include "agent/cli/wiring.h"
#include "agent/config/config_check.h"
#include "agent/config/host_info.h"
#include "agent/config/run_flags.h"
#include "agent/config/run_plan.h"
#include "agent/config/subcommand.h"
#include "agent/diagnostics/gpu_probe.h"
#include "agent/workers/debug_mode.h"
#include "agent/workers/numa_setup.h"
#include "agent/workers/worker_torch.h"
#include "base/exit_codes.h"
#include "base/logging.h"
#include "rendezvous/grpc/grpc_log.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace muster {
namespace {

std::map<std::string, std::string> ReadEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

void PrintUsage(FILE* out) { std::fputs(CommandsUsage(), out); }

// A Python that takes longer than this to start is looked at no further (the spellings
// then suit every torch version).
constexpr absl::Duration kWorkerTorchTimeout = absl::Seconds(10);

int RunCommand(const std::vector<std::string>& args, RunForm form = RunForm::kRun) {
  std::map<std::string, std::string> env = ReadEnvironment();
  const Subcommand& run = RunSubcommand(form);
  int code = exit_code::kSuccess;
  std::optional<FlagValues> flags = StartSubcommand(run, args, env, &code);
  if (!flags) return code;
  absl::StatusOr<Config> config = ParseRunFlags(*flags, HostInfo::Detect(env), form);
  if (!config.ok()) return UsageError(run, config.status().message());
  if (absl::Status checked = CheckRunConfig(&*config); !checked.ok()) {
    return UsageError(run, checked.message());
  }
  for (const std::string& warning : config->warnings) {
    std::fprintf(stderr, "muster %s: warning: %s\n", std::string(run.name).c_str(),
                 warning.c_str());
  }
  if (config->dry_run) {
    std::fputs(DescribeConfig(*config, env).c_str(), stdout);
    return exit_code::kSuccess;
  }
  InitLogging(config->log_level);
  // The resolve step (agent/config/run_plan.h): what only this host can say, then the plan,
  // which nothing changes afterwards.
  WorkerPlan workers{.nproc = config->nproc_per_node};
  nlohmann::json probe_report;
  if (int stop = ApplyProbe(env, *config, &workers.nproc, &probe_report); stop != 0) return stop;
  if (absl::Status numa = ResolveNumaBinding(env, probe_report, *config, &workers); !numa.ok()) {
    spdlog::error("{}", std::string(numa.message()));
    return exit_code::kUsage;
  }
  workers.env_base = std::move(env);
  // Before any child of the agent's loop exists: the look at the workers' Python reaps its
  // own child (agent/workers/worker_torch.h).
  workers.torch =
      FindWorkerTorch(workers.env_base, WorkerInterpreter(*config), kWorkerTorchTimeout);
  return RunAgent(ResolveRunPlan(*std::move(config), std::move(workers), std::move(probe_report)));
}

// Whether this process was started by the name `torchrun` (argv[0]'s last path component):
// a container image or a venv that links torchrun to muster runs every script and tool that
// calls torchrun under muster, with no edit.
bool InvokedAsTorchrun(const char* argv0) {
  std::string_view name = argv0 != nullptr ? argv0 : "";
  const size_t slash = name.rfind('/');
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  return name == "torchrun";
}

}  // namespace
}  // namespace muster

int main(int argc, char** argv) {
  namespace exit_code = muster::exit_code;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (argc > 0 && muster::InvokedAsTorchrun(argv[0])) {
    muster::rdzv::RouteGrpcLogsToSpdlog();
    return muster::RunCommand(args);
  }
  if (args.empty()) {
    muster::PrintUsage(stderr);
    return exit_code::kUsage;
  }
  const std::string& cmd = args[0];
  if (cmd == "--version" || cmd == "-V" || cmd == "version") {
    std::printf("muster %s\n", MUSTER_VERSION);
    return exit_code::kSuccess;
  }
  // Hidden: docs/reference/flags.md, generated from the flag tables (agent/cli/flags_reference.h).
  if (cmd == "help" && args.size() == 2 && args[1] == "--markdown") {
    std::fputs(muster::FlagsReferenceMarkdown().c_str(), stdout);
    return exit_code::kSuccess;
  }
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    muster::PrintUsage(stdout);
    return exit_code::kSuccess;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  muster::rdzv::RouteGrpcLogsToSpdlog();  // before any gRPC object: its lines via spdlog
  if (cmd == "run") return muster::RunCommand(rest);
  if (cmd == "launch") return muster::RunCommand(rest, muster::RunForm::kLaunch);
  if (cmd == "serve") return muster::ServeCommand(rest, muster::ReadEnvironment());
  if (cmd == "status") return muster::StatusCommand(rest, muster::ReadEnvironment());
  if (cmd == "stacks") return muster::StacksCommand(rest, muster::ReadEnvironment());
  if (cmd == "drain") return muster::DrainCommand(rest, muster::ReadEnvironment());
  if (cmd == "exec") return muster::ExecCommand(rest, muster::ReadEnvironment());
  std::fprintf(stderr, "muster: unknown command '%s'\n", cmd.c_str());
  muster::PrintUsage(stderr);
  return exit_code::kUsage;
}
