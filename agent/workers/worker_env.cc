#include "agent/workers/worker_env.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "agent/config/torchrun_compat.h"
#include "agent/workers/torch_names.h"
#include "launch/exit_status.h"

namespace muster {

std::vector<std::string> BuildWorkerEnv(const Config& config, const WorkerPlan& workers,
                                        const WorkerPlacement& p, const RoundInfo& round) {
  const std::map<std::string, std::string>& agent_env = workers.env_base;
  std::map<std::string, std::string> env = agent_env;
  // The rendezvous secret is the agent's; a worker (and whatever it logs or dumps) never
  // needs it.
  env.erase("MUSTER_TOKEN");
  auto set = [&](const char* name, const std::string& value) { env[name] = value; };
  auto num = [&](const char* name, int value) { env[name] = std::to_string(value); };
  num("LOCAL_RANK", p.local_rank);
  if (config.virtual_local_rank) {
    // torchrun's --virtual-local-rank: the worker sees its own GPU alone, as device 0.
    set("LOCAL_RANK", "0");
    set("CUDA_VISIBLE_DEVICES", VirtualLocalDevice(agent_env, p.local_rank));
  }
  num("RANK", p.rank);
  num("GROUP_RANK", p.group_rank);
  num("ROLE_RANK", p.role_rank);
  set("ROLE_NAME", config.role);
  num("LOCAL_WORLD_SIZE", p.local_world_size);
  num("WORLD_SIZE", p.world_size);
  num("GROUP_WORLD_SIZE", p.group_world_size);
  num("ROLE_WORLD_SIZE", p.role_world_size);
  set("MASTER_ADDR", round.master_addr);
  num("MASTER_PORT", round.master_port);
  num("TORCHELASTIC_RESTART_COUNT", round.restart_count);
  num("TORCHELASTIC_MAX_RESTARTS", config.max_restarts);
  set("TORCHELASTIC_RUN_ID", round.run_id);
  set("TORCHELASTIC_USE_AGENT_STORE", round.use_agent_store ? "True" : "False");
  set("TORCHELASTIC_ERROR_FILE", round.error_file);
  // torch >= 2.2 reads the TORCH_ name, 1.x only the old one (torch_contract.md §5.2): the
  // one the workers' torch reads, both when it is unknown. A user who set either name
  // chose: muster then sets neither (newer torch warns that the old name is deprecated, so
  // a user who set only the new one keeps it alone).
  if (!env.count(kAsyncErrorHandling.name) && !env.count(kAsyncErrorHandling.old_name)) {
    for (const char* name : NamesFor(kAsyncErrorHandling, workers.torch)) set(name, "1");
  }
  // As torchrun 2.x (launcher/api.py launch_agent): the signals the agent forwards, which
  // torch's own process contexts in a worker handle too.
  std::vector<std::string> signals;
  for (int sig : config.signals_to_handle) signals.push_back(SignalName(sig));
  set("TORCHELASTIC_SIGNALS_TO_HANDLE", absl::StrJoin(signals, ","));
  // torchrun sets OMP_NUM_THREADS=1 in its own environment when unset and nproc
  // > 1.
  if (!env.count("OMP_NUM_THREADS") && p.local_world_size > 1) set("OMP_NUM_THREADS", "1");
  // Output streams as the worker writes it: `-u` covers the interpreter muster adds, this a
  // command that starts python itself (a Pod's `python train.py`) and its python children.
  // The user's value, any value, wins.
  if (!env.count("PYTHONUNBUFFERED")) set("PYTHONUNBUFFERED", "1");
  // Not set by torchrun; launchers users come from (DeepSpeed, Horovod,
  // seeds/004) do.
  num("NODE_RANK", p.group_rank);
  // DeepSpeed's per-node contract (its launcher sets these; no LOCAL_WORLD_SIZE there).
  num("CROSS_RANK", p.group_rank);
  num("CROSS_SIZE", p.group_world_size);
  num("LOCAL_SIZE", p.local_world_size);

  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(absl::StrCat(k, "=", v));
  return out;
}

std::vector<std::string> BuildWorkerArgv(const Config& config, const WorkerPlan& workers,
                                         int local_rank) {
  std::vector<std::string> argv;
  if (!config.no_python) {
    argv = {config.python_exec, "-u"};
    if (config.module) argv.push_back("-m");
  }
  argv.insert(argv.end(), config.command.begin(), config.command.end());
  // --local-rank-arg names the spelling; `muster launch` alone passes torch's own (one
  // argument either way: a script that knows only --local_rank rejects --local-rank).
  if (config.local_rank_arg) {
    argv.push_back(absl::StrCat("--local_rank=", local_rank));
  } else if (config.legacy_local_rank_arg) {
    argv.push_back(LegacyLocalRankArgument(workers.torch, local_rank));
  }
  return argv;
}

std::vector<int> CpuShare(const std::vector<int>& available, const std::map<int, int>& numa_of,
                          int local_rank, int local_world_size) {
  std::vector<int> cpus = available;
  auto node = [&](int cpu) {
    auto it = numa_of.find(cpu);
    return it == numa_of.end() ? 0 : it->second;
  };
  std::sort(cpus.begin(), cpus.end(),
            [&](int a, int b) { return std::make_pair(node(a), a) < std::make_pair(node(b), b); });
  if (local_world_size <= 0 || cpus.empty()) return {};
  size_t n = cpus.size(), k = local_world_size;
  if (n < k) return {cpus[local_rank % n]};  // more ranks than CPUs: share round robin
  size_t base = n / k, extra = n % k, r = local_rank;
  size_t begin = r * base + std::min(r, extra);
  size_t len = base + (r < extra ? 1 : 0);
  return std::vector<int>(cpus.begin() + begin, cpus.begin() + begin + len);
}

std::string ExpandPrefix(const std::string& tmpl, const std::string& role, const WorkerPlacement& p,
                         const std::string& hostname) {
  return absl::StrReplaceAll(tmpl, {{"${role_name}", role},
                                    {"${local_rank}", std::to_string(p.local_rank)},
                                    {"${rank}", std::to_string(p.rank)},
                                    {"${hostname}", hostname}});
}

}  // namespace muster
