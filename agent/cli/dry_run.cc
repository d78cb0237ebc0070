#include "agent/cli/dry_run.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/workers/worker_env.h"
#include "agent/workers/worker_specs.h"
#include "base/duration.h"
#include "base/shell_words.h"
#include "launch/containment.h"
#include "launch/exit_status.h"

namespace muster {
namespace {

// The mode a run would use, found the way a run finds it (a cgroup is made and removed).
std::string DescribeContainment(Containment requested, bool allow_escape) {
  absl::StatusOr<ContainmentChoice> choice = ChooseContainment(requested, allow_escape);
  if (!choice.ok()) return absl::StrCat("none: ", choice.status().message());
  if (choice->cgroup && !choice->cgroup->escape().empty()) {
    return absl::StrCat(choice->description, " (workers can leave it: they hold ",
                        choice->cgroup->escape(), "; docs/operations/containment.md)");
  }
  return choice->description;
}

// Which path starts the workers (launch/worker_source.h), and the fallbacks known before the
// run; those found at run time are in `muster status` (docs/guides/warm-start.md).
std::string WorkerStartDescription(const Config& c) {
  if (!c.warm_start) return "exec: each worker execs its command (default)";
  if (c.no_python) return "exec: --warm-start has no effect with --no-python";
  return absl::StrCat(
      "warm (--warm-start): forked from a template that imported ",
      c.preload.empty() ? std::string("nothing") : absl::StrJoin(c.preload, ","),
      " once; exec'd where a fork is unsafe (docs/guides/warm-start.md)",
      c.numa_binding ? "; exec'd: ranks that --numa-binding gives a NUMA memory policy" : "");
}

// What the policy does with a failure, in the words of docs/reference/exit-codes.md's table, and
// the budget.
std::string RestartSummary(const Config& c) {
  std::string codes = absl::StrJoin(c.restartable_exit_codes, ", ");
  std::string what;
  switch (c.restart_policy) {
    case RestartPolicy::kExitCode:
      what = absl::StrCat("exit codes ", codes.empty() ? std::string("(none)") : codes,
                          " restart, any other non-zero exit fails the job (torchrun restarts "
                          "on any failure: --restart-policy OnFailure)");
      break;
    case RestartPolicy::kOnFailure:
      what = "any non-zero exit restarts the job, as torchrun";
      break;
    case RestartPolicy::kAlways:
      what = "any non-zero exit restarts the job, and so does a round whose workers all exit 0";
      break;
    case RestartPolicy::kNever:
      what = "no exit restarts: any non-zero exit fails the job";
      break;
  }
  std::string budget =
      c.restart_policy == RestartPolicy::kNever && c.max_restarts > 0
          ? absl::StrCat("--max-restarts ", c.max_restarts, " has no effect under Never")
      : c.max_restarts == 0
          ? std::string("no restart budget (--max-restarts 0): the first failure ends the job")
          : absl::StrCat("up to ", c.max_restarts, c.max_restarts == 1 ? " restart" : " restarts",
                         " of the whole job");
  std::string fatal =
      c.fatal_exit_code
          ? absl::StrCat("; a job that fails for good exits ", *c.fatal_exit_code,
                         " (--fatal-exit-code), lost nodes 138, a preemption 143")
          : std::string("; a job that fails for good exits with the root cause's code");
  return absl::StrCat(RestartPolicyName(c.restart_policy), ": ", what, "; ", budget, fatal);
}

// What the health gate checks before every round (docs/guides/health-gate.md).
std::string DescribeHealthGate(const Config& c) {
  std::vector<std::string> checks;
  if (c.health_min_free_bytes > 0) {
    const uint64_t bytes = c.health_min_free_bytes;
    checks.push_back(absl::StrCat(bytes % (1 << 20) == 0 ? bytes >> 20 : bytes,
                                  bytes % (1 << 20) == 0 ? " MiB" : " bytes",
                                  " free in the run directory"));
  }
  checks.push_back("the GPUs the probe found at start, again between rounds");
  if (!c.health_check.empty()) {
    checks.push_back(absl::StrCat("`", c.health_check, "` exits 0 within ",
                                  HumanDuration(c.health_check_timeout)));
  }
  const std::string spares =
      c.spare_check_interval > absl::ZeroDuration()
          ? absl::StrCat("; a waiting spare again every ", HumanDuration(c.spare_check_interval))
          : "";
  return absl::StrCat(absl::StrJoin(checks, "; "), spares,
                      "; a node that fails sits out, named in `muster status`");
}

}  // namespace

std::string DescribeConfig(const Config& c, const std::map<std::string, std::string>& env) {
  std::string out = "muster run --dry-run: resolved configuration\n";
  auto line = [&](std::string_view key, const std::string& value) {
    absl::StrAppend(&out, "  ", std::string(key),
                    std::string(24 - std::min<size_t>(key.size(), 23), ' '), value, "\n");
  };
  auto source = [&](const char* flag) {
    auto it = c.sources.find(flag);
    return it == c.sources.end() ? std::string(" (default)")
                                 : absl::StrCat(" (from ", it->second, ")");
  };
  line("nodes",
       absl::StrCat(c.min_nodes == c.max_nodes ? std::to_string(c.max_nodes)
                                               : absl::StrCat(c.min_nodes, ":", c.max_nodes),
                    source("nnodes")));
  line("spares",
       absl::StrCat(c.spares == 0 ? std::string("no limit") : absl::StrCat("up to ", c.spares),
                    ": agents beyond --nnodes wait as hot spares (docs/guides/spares.md)",
                    source("spares")));
  line("nproc per node",
       absl::StrCat(c.nproc_per_node, " (", c.nproc_spec, ")", source("nproc-per-node")));
  line("world size", std::to_string(c.nproc_per_node * c.max_nodes));
  line("role", c.role + source("role"));
  if (c.virtual_local_rank) {
    line("local rank", "0 for every worker, each with its own CUDA_VISIBLE_DEVICES entry" +
                           source("virtual-local-rank"));
  }
  line("run id",
       (c.standalone && c.run_id == "none" ? std::string("random (standalone)") : c.run_id) +
           source("rdzv-id"));
  if (c.store == StoreOwner::kAgent && !c.rdzv_host_name.empty()) {
    std::string where =
        c.tls_cert.empty()
            ? absl::StrCat("the rendezvous port ", c.rdzv_port,
                           " when that agent serves the rendezvous (else a fresh port)")
            : std::string("a fresh port (TLS: the rendezvous port is not shared)");
    line("store", absl::StrCat("served by the group rank 0 agent at the address it advertises, ",
                               "on ", where, ", fresh keys per round",
                               " (TORCHELASTIC_USE_AGENT_STORE=True)", source("store")));
  } else if (c.store == StoreOwner::kAgent) {
    std::string port = FixedStorePort(c) != 0
                           ? absl::StrCat(":", c.master_port, " (--master-port), a fresh store")
                           : std::string(", a fresh port");
    line("store",
         absl::StrCat("served by this agent at ", c.master_addr, port,
                      " per attempt (TORCHELASTIC_USE_AGENT_STORE=True)", source("store")));
  } else {
    std::string port = c.standalone && !c.master_port_given ? std::string("a free port")
                                                            : std::to_string(c.master_port);
    line("store", absl::StrCat("worker rank 0 binds ", c.master_addr, ":", port,
                               " (TORCHELASTIC_USE_AGENT_STORE=False)", source("store")));
  }
  line("restart policy", RestartSummary(c) + source("restart-policy"));
  std::vector<std::string> sigs;
  for (int s : c.signals_to_handle) sigs.push_back(SignalName(s));
  line("signals",
       absl::StrCat(absl::StrJoin(sigs, ","), "; SIGKILL after ", HumanDuration(c.shutdown_timeout),
                    " (a stop for a restart: ", HumanDuration(c.RestartGrace()), ")"));
  line("exit barrier",
       c.exit_barrier_timeout == absl::ZeroDuration()
           ? std::string("waits for the job's outcome as long as the job lives")
           : absl::StrCat("leaves the job and exits 138 ", HumanDuration(c.exit_barrier_timeout),
                          " after this node's workers exited 0 without the job's outcome"));
  line("health gate", DescribeHealthGate(c));
  line("containment",
       DescribeContainment(c.containment, c.allow_cgroup_escape) + source("containment"));
  if (c.numa_binding) {
    line("numa binding",
         absl::StrCat(NumaBindingModeName(*c.numa_binding),
                      ": local rank N on CPUs near GPU N, memory preferred on its node (resolved "
                      "at start from the GPU probe and /sys)",
                      source("numa-binding")));
  }
  line("log dir", c.log_dir.empty() ? std::string("temporary (removed at exit)") : c.log_dir);
  std::vector<std::string> detected;
  for (const auto& [k, v] : env) {
    if (k.rfind("MUSTER_", 0) == 0 || k.rfind("PET_", 0) == 0) detected.push_back(k);
  }
  for (const char* k : {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "JOB_COMPLETION_INDEX",
                        "VC_TASK_INDEX", "POD_IP", "CUDA_VISIBLE_DEVICES", "PYTHON_EXEC"}) {
    if (env.count(k)) detected.push_back(k);
  }
  line("operator convention", c.convention.empty() ? std::string("none") : c.convention);
  if (!c.rdzv_host_name.empty()) {
    line("rendezvous", absl::StrCat(c.rdzv_host_name, ":", c.rdzv_port,
                                    c.static_rendezvous ? " (static form)" : "",
                                    ", hosted here: ", ModeName(c.rdzv_hosting),
                                    c.node_rank >= 0 ? absl::StrCat(", node rank ", c.node_rank)
                                                     : std::string(", node rank by arrival"),
                                    c.token.empty() ? "" : ", token required"));
  }
  line("env sources detected",
       detected.empty() ? std::string("none") : absl::StrJoin(detected, " "));
  // The workers' torch is not looked at: the spellings of every version.
  line("command", ShellJoin(BuildWorkerArgv(c, WorkerPlan{})));
  line("worker start", WorkerStartDescription(c));
  return out;
}

}  // namespace muster
