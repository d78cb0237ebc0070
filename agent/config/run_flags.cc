#include "agent/config/run_flags.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/types/span.h"
#include "agent/config/etcd_security_flags.h"
#include "agent/config/flag_parsers.h"
#include "agent/config/hang_flags.h"
#include "agent/config/rendezvous_flags.h"
#include "agent/config/run_flag_steps.h"
#include "agent/config/torchrun_compat.h"
#include "base/closest_name.h"
#include "base/duration.h"
#include "base/plural.h"
#include "base/status_macros.h"
#include "launch/restart_policy.h"
#include "launch/signals.h"

namespace muster {
namespace {

constexpr char kDefaultSignals[] = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";

// The table: --help lists it in this order, and ParseRunFlags applies it in this order
// (so --nnodes comes before --node-rank, which is checked against it; --bind-cores-to-rank
// before --bind-core-list, which sets it; --enable-each-rank-log before --log-dir, which
// wins). --nnodes and the rendezvous flags head it: see ParseRunFlags. torchrun's flags that
// muster has no flag of its own for (torchrun_compat.h) end it.
constexpr FlagSpec kMusterFlags[] = {
    {.name = "nnodes",
     .group = "Job",
     .default_text = "1",
     .help = "number of nodes, N or MIN:MAX",
     .apply = ApplyNnodes},
    {.name = "spares",
     .group = "Job",
     .default_text = "0 (no limit)",
     .help = "hot spares: agents beyond --nnodes (its MAX) wait, healthy and warm, and take "
             "the place of a lost or excluded node in the next round, WORLD_SIZE unchanged; "
             "one more than this is refused (docs/guides/spares.md)",
     .apply = ApplySpares},
    {.name = "rdzv-endpoint",
     .group = "Rendezvous",
     .default_text = "none",
     .help = "HOST[:PORT] of the rendezvous server (port 29400); needed when --nnodes > 1; "
             "port 0 (one node only): a free port, as torchrun",
     .apply = ApplyRdzvEndpoint},
    {.name = "standalone",
     .takes_value = false,
     .group = "Rendezvous",
     .default_text = "off",
     .help = "one node with its own rendezvous, a private store port and a fresh run id",
     .apply = SetSwitch<&Config::standalone>},
    {.name = "rdzv-conf",
     .group = "Rendezvous",
     .default_text = "",
     .help = "join_timeout=600s,last_call_timeout=30s,heartbeat_interval=5s,heartbeat_misses=3,"
             "hang_timeout=0,hang_action=restart; torch's keys too; other keys: one warning, "
             "ignored",
     .apply = ApplyRdzvConf},
    {.name = "rdzv-host",
     .group = "Rendezvous",
     .default_text = "auto",
     .help = "serve the rendezvous here: auto (when the endpoint is this node), true, false",
     .apply = ApplyRdzvHost},
    {.name = "node-rank",
     .group = "Rendezvous",
     .default_text = "by arrival",
     .help = "this node's group rank (a hint)",
     .apply = ApplyNodeRank},
    {.name = "local-addr",
     .group = "Rendezvous",
     .default_text = "POD_IP, else route to endpoint",
     .help = "address other nodes reach this one at (MASTER_ADDR when it is group rank 0); "
             "the store and health port listen there only",
     .apply = ApplyLocalAddr},
    {.name = "token-file",
     .group = "Rendezvous",
     .default_text = "MUSTER_TOKEN",
     .help = "file with the job's shared secret",
     .apply = ApplyTokenFile},
    {.name = "tls-cert",
     .group = "Rendezvous",
     .default_text = "none",
     .help = "PEM certificate for the rendezvous server",
     .apply = SetText<&Config::tls_cert>},
    {.name = "tls-key",
     .group = "Rendezvous",
     .default_text = "none",
     .help = "PEM key for --tls-cert",
     .apply = SetText<&Config::tls_key>},
    {.name = "tls-ca",
     .group = "Rendezvous",
     .default_text = "none",
     .help = "PEM CA that signed the server's certificate",
     .apply = SetText<&Config::tls_ca>},
    {.name = "nproc-per-node",
     .group = "Job",
     .default_text = "1",
     .help = "workers on this node: N, cpu, gpu or auto",
     .apply = SetText<&Config::nproc_spec>},
    {.name = "rdzv-id",
     .group = "Job",
     .default_text = "none",
     .help = "run id shared by the job (alias --run-id)",
     .apply = ApplyRdzvId},
    {.name = "run-id",
     .group = "Job",
     .default_text = "none",
     .help = "alias of --rdzv-id",
     .apply = ApplyRunId},
    {.name = "role",
     .group = "Job",
     .default_text = "default",
     .help = "worker role name (ROLE_NAME)",
     .apply = SetNonEmpty<&Config::role>},
    {.name = "store",
     .group = "Job",
     .default_text = "agent",
     .help = "c10d store: agent (served here, fresh port per attempt) or rank0 (worker rank 0, "
             "static)",
     .apply = SetMode<StoreOwner, &Config::store>},
    {.name = "store-max-bytes",
     .group = "Job",
     .default_text = "1GiB",
     .help = "the most keys and values the agent's c10d store holds; a worker whose write "
             "would pass it is disconnected and the agent logs why (docs/operations/limits.md)",
     .apply = SetParsed<&Config::store_max_bytes, ParseByteSize>},
    {.name = "master-addr",
     .group = "Job",
     .default_text = "127.0.0.1",
     .help = "MASTER_ADDR given to workers",
     .apply = ApplyMasterAddr},
    {.name = "master-port",
     .group = "Job",
     .default_text = "29500",
     .help = "MASTER_PORT: on one node the agent's store binds it every attempt (default "
             "there, and 0: a free port); with --store rank0 worker rank 0 binds it",
     .apply = ApplyMasterPort},
    {.name = "rdzv-backend",
     .group = "Job",
     .default_text = "static",
     .help = "static or c10d: both meet at muster's own rendezvous; etcd (or etcd-v2, the same): "
             "etcd members at --rdzv-endpoint H1:2379,H2:2379,... (docs/guides/etcd.md)",
     .apply = CheckRdzvBackend},
    {.name = "module",
     .short_name = 'm',
     .takes_value = false,
     .group = "Command",
     .default_text = "off",
     .help = "run the command as a Python module (python -m)",
     .apply = SetSwitch<&Config::module>},
    {.name = "no-python",
     .takes_value = false,
     .group = "Command",
     .default_text = "off",
     .help = "exec the command directly, not through Python",
     .apply = SetSwitch<&Config::no_python>},
    {.name = "warm-start",
     .takes_value = false,
     .group = "Command",
     .default_text = "off",
     .help = "fork each rank from a Python that imported --preload once, so that no start or "
             "restart waits for `import torch`; exec'd where a fork is unsafe "
             "(docs/guides/warm-start.md)",
     .apply = SetSwitch<&Config::warm_start>},
    {.name = "preload",
     .group = "Command",
     .default_text = "torch",
     .help = "modules the --warm-start template imports, comma-separated",
     .apply = ApplyPreload},
    {.name = "local-rank-arg",
     .takes_value = false,
     .group = "DeepSpeed",
     .default_text = "off",
     .help = "append --local_rank=N to each worker's arguments (DeepSpeedJob localRank)",
     .apply = SetSwitch<&Config::local_rank_arg>},
    {.name = "bind-cores-to-rank",
     .takes_value = false,
     .group = "DeepSpeed",
     .default_text = "off",
     .help = "give each local rank its own contiguous share of the CPUs (NUMA-aware)",
     .apply = SetSwitch<&Config::bind_cores_to_rank>},
    {.name = "bind-core-list",
     .group = "DeepSpeed",
     .default_text = "all allowed",
     .help = "CPUs to share out, e.g. 0-15,32-47",
     .apply = ApplyBindCoreList},
    {.name = "enable-each-rank-log",
     .group = "DeepSpeed",
     .default_text = "none",
     .help = "per-rank log files under this directory (same as --log-dir)",
     .apply = SetText<&Config::log_dir>},
    {.name = "save-pid",
     .group = "DeepSpeed",
     .default_text = "none",
     .help = "write the agent's pid to this file",
     .apply = SetText<&Config::save_pid>},
    {.name = "hostfile",
     .group = "DeepSpeed",
     .default_text = "none",
     .help = "write a DeepSpeed-style hostfile (address slots=N) for each round",
     .apply = SetText<&Config::hostfile>},
    {.name = "max-restarts",
     .group = "Failures",
     .default_text = "0",
     .help = "job-wide restart budget",
     .apply = ApplyMaxRestarts},
    {.name = "restart-policy",
     .group = "Failures",
     .default_text = "OnFailure",
     .help = "OnFailure: any failure restarts while --max-restarts lasts (torchrun's rule); "
             "ExitCode: only --restartable-exit-codes restart; Never; Always",
     .apply = ApplyRestartPolicy},
    {.name = "restartable-exit-codes",
     .group = "Failures",
     .default_text = "130,137,138,143",
     .help = "codes that restart the job under ExitCode",
     .apply = SetParsed<&Config::restartable_exit_codes, ParseExitCodeList>},
    {.name = "fatal-exit-code",
     .group = "Failures",
     .default_text = "the root cause's code",
     .help = "exit with this code when the job fails for good (not restartable, or the "
             "budget spent), so a scheduler does not requeue it; lost nodes and preemption "
             "keep 138/143. E.g. 93",
     .apply = SetParsed<&Config::fatal_exit_code, ParseFatalExitCode>},
    {.name = "shutdown-timeout",
     .group = "Failures",
     .default_text = "30s",
     .help = "grace period between SIGTERM and SIGKILL (etcd cut off: until the lease's end)",
     .apply = SetParsed<&Config::shutdown_timeout, ParseDuration>},
    {.name = "restart-grace",
     .group = "Failures",
     .default_text = "--shutdown-timeout",
     .help = "grace period between SIGTERM and SIGKILL when the workers are stopped for a "
             "restart (a failure, a lost node, a hang); --shutdown-timeout stays the grace for "
             "a signal to the agent and the job's end",
     .apply = SetParsed<&Config::restart_grace, ParseDuration>},
    {.name = "exit-barrier-timeout",
     .group = "Failures",
     .default_text = "0 (as long as the job lives)",
     .help = "how long a node whose workers all exited 0 waits for the rest of the job; past "
             "it the node leaves the job and exits 138 (torchrun: --rdzv-conf "
             "exit_barrier_timeout, a fixed 300s there)",
     .apply = SetParsed<&Config::exit_barrier_timeout, ParseDuration>},
    {.name = "hang-timeout",
     .group = "Failures",
     .default_text = "0 (off)",
     .help = "a hang is every worker of every node without CPU progress and with the same "
             "stacks this long: the culprit is named, stacks go to the log dir "
             "(docs/guides/hangs-and-stacks.md)",
     .apply = ApplyHangTimeout},
    {.name = "hang-action",
     .group = "Failures",
     .default_text = "restart",
     .help = "on a hang: restart (the restart budget applies; exit 138 once spent) or fail "
             "(exit 1)",
     .apply = ApplyHangAction},
    {.name = "straggler-window",
     .group = "Failures",
     .default_text = "0 (off)",
     .help = "name the rank the others wait for in collectives: every --straggler-interval each "
             "agent samples its ranks' stacks; a rank outside the collective most ranks wait in, "
             "in >= --straggler-share of this window's samples, is named in the log, `muster "
             "status` and metrics (docs/guides/hangs-and-stacks.md)",
     .apply = ApplyStragglerWindow},
    {.name = "straggler-interval",
     .group = "Failures",
     .default_text = "1s",
     .help = "how often stragglers are sampled (a stack dump per rank, about 0.25 ms of its CPU)",
     .apply = ApplyStragglerInterval},
    {.name = "straggler-share",
     .group = "Failures",
     .default_text = "0.4",
     .help = "the share of the window's samples a rank must keep the others waiting to be named; "
             "it is cleared below half of it",
     .apply = ApplyStragglerShare},
    {.name = "preempt-signal",
     .group = "Failures",
     .default_text = "SIGUSR1",
     .help = "sent with a preemption notice to workers that catch it; none: the file only",
     .apply = SetParsed<&Config::preempt_signal, ParsePreemptSignal>},
    {.name = "preempt-grace",
     .group = "Failures",
     .default_text = "20s",
     .help = "how long workers may checkpoint after a preemption notice (<= shutdown-timeout)",
     .apply = SetParsed<&Config::preempt_grace, ParseDuration>},
    {.name = "preempt-file",
     .group = "Failures",
     .default_text = "none",
     .help = "a file whose appearance preempts this node (spot-instance notices)",
     .apply = SetText<&Config::preempt_file>},
    {.name = "signals-to-handle",
     .group = "Failures",
     .default_text = kDefaultSignals,
     .help = "signals forwarded to workers before the agent exits 128+N",
     .apply = SetParsed<&Config::signals_to_handle, ParseSignalList>},
    {.name = "containment",
     .group = "Failures",
     .default_text = "auto",
     .help =
         "how nothing a worker starts outlives the job: cgroup (a cgroup per attempt, "
         "cgroup.kill), session (sessions, pidfds, watchdog, and a supervisor process above the "
         "agent unless it is PID 1) or auto (cgroup when one can be made)",
     .apply = ApplyContainment},
    {.name = "allow-cgroup-escape",
     .takes_value = false,
     .group = "Failures",
     .default_text = "off",
     .help = "--containment cgroup even when workers hold what lets them leave their cgroup "
             "(uid 0 without nsdelegate; docs/operations/containment.md)",
     .apply = SetSwitch<&Config::allow_cgroup_escape>},
    {.name = "monitor-interval",
     .group = "Failures",
     .default_text = "-",
     .help = "accepted for torchrun compatibility; muster is event driven and never polls",
     .apply = CheckParses<ParseDuration>},
    {.name = "log-dir",
     .group = "Output",
     .default_text = "temporary",
     .help = "per-rank logs: attempt_N/<local_rank>/std{out,err}.log",
     .apply = SetNonEmpty<&Config::log_dir>},
    {.name = "redirects",
     .short_name = 'r',
     .group = "Output",
     .default_text = "0",
     .help = "streams to files only: 0-3 or 0:1,1:2 per local rank",
     .apply = SetStreams<&Config::redirects>},
    {.name = "tee",
     .short_name = 't',
     .group = "Output",
     .default_text = "0",
     .help = "streams to files and console: 0-3 or 0:1,1:2",
     .apply = SetStreams<&Config::tee>},
    {.name = "local-ranks-filter",
     .group = "Output",
     .default_text = "all",
     .help = "local ranks shown on the console, e.g. 0,3",
     .apply = ApplyLocalRanksFilter},
    {.name = "log-line-prefix-template",
     .group = "Output",
     .default_text = "[${role_name}${local_rank}]:",
     .help = "console prefix; ${role_name} ${local_rank} ${rank} ${hostname}",
     .apply = SetText<&Config::log_line_prefix_template>},
    {.name = "log-level",
     .group = "Output",
     .default_text = "info",
     .help = "agent log level (also LOGLEVEL)",
     .apply = ApplyLogLevel},
    {.name = "event-log",
     .group = "Output",
     .default_text = "none",
     .help = "append the agent's transitions as JSON lines",
     .apply = SetText<&Config::event_log>},
    {.name = "status-file",
     .group = "Health",
     .default_text = "none",
     .help = "this node's status as JSON, replaced atomically on every transition",
     .apply = SetText<&Config::status_file>},
    {.name = "termination-log",
     .group = "Health",
     .default_text = "/dev/termination-log if present",
     .help = "one line with the root cause (or success) written at exit",
     .apply = SetText<&Config::termination_log>},
    {.name = "health-port",
     .group = "Health",
     .default_text = "none",
     .help = "grpc.health.v1 here (on --local-addr/POD_IP, else the store's address): \"\" "
             "ready once the agent is part of the job (at once where it hosts the "
             "rendezvous), muster.v1.Workers while the workers run, muster.v1.Liveness while "
             "the agent runs",
     .apply = ApplyHealthPort},
    {.name = "metrics-port",
     .group = "Health",
     .default_text = "none",
     .help = "Prometheus metrics here (HTTP /metrics; docs/reference/metrics.md)",
     .apply = ApplyMetricsPort},
    {.name = "no-stack-hook",
     .takes_value = false,
     .group = "Health",
     .default_text = "off",
     .help = "give workers no stack hook (no sitecustomize on their PYTHONPATH); `muster "
             "stacks` then shows py-spy's stacks where py-spy is on the PATH, else none "
             "(docs/guides/hangs-and-stacks.md)",
     .apply = SetSwitch<&Config::no_stack_hook>},
    {.name = "probe",
     .group = "GPU",
     .default_text = "auto",
     .help = "off | auto (inventory when a driver may be present) | inventory | nccl",
     .apply = SetMode<ProbeMode, &Config::probe>},
    {.name = "stale-gpu-policy",
     .group = "GPU",
     .default_text = "fail",
     .help = "GPUs held by other processes at start: fail (naming the pids), wait or kill",
     .apply = SetMode<StaleGpuPolicy, &Config::stale_gpu_policy>},
    {.name = "probe-timeout",
     .group = "GPU",
     .default_text = "30s",
     .help = "deadline for muster-probe",
     .apply = ApplyProbeTimeout},
    {.name = "health-check",
     .group = "Health",
     .default_text = "none",
     .help = "a shell command run before every round (and while the node is kept out): exit 0 "
             "is healthy; otherwise the node sits out the rounds, named in `muster status`, "
             "and re-checks on a backoff (docs/guides/health-gate.md)",
     .apply = SetText<&Config::health_check>},
    {.name = "health-check-timeout",
     .group = "Health",
     .default_text = "30s",
     .help = "deadline of --health-check; a check still running then is killed and counts as "
             "failed",
     .apply = ApplyHealthCheckTimeout},
    {.name = "health-min-free-space",
     .group = "Health",
     .default_text = "100MiB",
     .help = "the free space the node's log/run directory must keep before a round; 0: not "
             "checked",
     .apply = ApplyHealthMinFreeSpace},
    {.name = "spare-check-interval",
     .group = "Health",
     .default_text = "30s",
     .help = "how often a hot spare runs the health checks while it waits; one that fails is "
             "kept out like a sick node until a check passes; 0: only before its join "
             "(docs/guides/spares.md)",
     .apply = ApplySpareCheckInterval},
    {.name = "quarantine-after",
     .group = "Health",
     .default_text = "2",
     .help = "quarantine a host for the rest of the job once the root cause of this many "
             "failed attempts was found there, when the next round can form without it (a "
             "spare, or --nnodes' minimum); 0: never (docs/guides/health-gate.md)",
     .apply = ApplyQuarantineAfter},
    {.name = "debug",
     .takes_value = false,
     .group = "Debug",
     .default_text = "off",
     .help = "rendezvous, write per-rank env files, run --debug-command instead of the workers",
     .apply = SetSwitch<&Config::debug>},
    {.name = "debug-command",
     .group = "Debug",
     .default_text = "/usr/sbin/sshd -D -e (after mkdir /run/sshd), else sleep infinity",
     .help = "what debug mode runs (a shell command line)",
     .apply = SetText<&Config::debug_command>},
    {.name = "debug-dir",
     .group = "Debug",
     .default_text = "/run/muster",
     .help = "where debug mode writes rank-N.env and hostfile",
     .apply = SetNonEmpty<&Config::debug_dir>},
    {.name = "debug-port",
     .group = "Debug",
     .default_text = "22",
     .help = "the port of the default sshd; refused at start when in use here",
     .apply = ApplyDebugPort},
    {.name = "dry-run",
     .takes_value = false,
     .group = "Other",
     .default_text = "off",
     .help = "print the resolved configuration and exit",
     .apply = SetSwitch<&Config::dry_run>},
};

template <size_t N, size_t M>
constexpr std::array<FlagSpec, N + M> Join(const FlagSpec (&a)[N], const FlagSpec (&b)[M]) {
  std::array<FlagSpec, N + M> out{};
  for (size_t i = 0; i < N + M; ++i) out[i] = i < N ? a[i] : b[i - N];
  return out;
}
constexpr std::array kRunFlags = Join(kMusterFlags, kTorchrunFlags);

// The head of the table: --nnodes and the rendezvous flags.
constexpr size_t kRendezvousEnd = [] {
  size_t end = 0;
  for (size_t i = 0; i < std::size(kRunFlags); ++i) {
    if (std::string_view(kRunFlags[i].group) == "Rendezvous") end = i + 1;
  }
  return end;
}();

static_assert(
    [] {
      for (const FlagSpec& spec : kRunFlags) {
        if (spec.apply == nullptr) return false;
      }
      return true;
    }(),
    "every flag of `muster run` needs its apply step");

constexpr Subcommand kRun = {
    .name = "run",
    .usage =
        "Usage: muster run [flags] [--] SCRIPT_OR_CMD [ARGS...]\n\n"
        "Starts this node's workers with the environment torch's env:// expects, "
        "supervises\n"
        "them, restarts the group on restartable failures and exits with the root cause.\n"
        "Every flag may be spelled with dashes or underscores and set as MUSTER_<FLAG> or\n"
        "PET_<FLAG> (precedence: flag > MUSTER_* > PET_* > default).\n",
    .flags = kRunFlags,
    .epilogue =
        "\nEnvironment: PYTHON_EXEC (interpreter, default python3), LOGLEVEL.\n"
        "Exit codes: 0 success; the root-cause worker's code (e.g. 1, 137); 2 bad "
        "flags or environment,\nor a set-up failure a restart cannot fix; 126/127 command "
        "not executable / not found;\n128+N agent stopped by signal N; 138 transient "
        "(rendezvous timed out, server lost, a port\nin use, no process could be forked): "
        "worth a restart.\n",
};

constexpr Subcommand kLaunch = {
    .name = "launch",
    .usage =
        "Usage: muster launch [flags] [--] SCRIPT [ARGS...]\n\n"
        "torch.distributed.launch's command line: `python -m torch.distributed.launch ARGS`\n"
        "becomes `muster launch ARGS`. It is `muster run`, and each worker's script also gets\n"
        "--local-rank=N (--local_rank=N when the workers' torch is 1.x, as its launch module\n"
        "passes) unless --use-env (then LOCAL_RANK only, as torchrun). --no-python needs\n"
        "--use-env. Every flag of `muster run` applies, spelled with dashes or underscores.\n",
    .flags = kRunFlags,
    .epilogue = kRun.epilogue,
};

// Environment variables operators set at node level (docs/design.md §4.8). They are not
// passed to workers as worker ranks, but a malformed one is a configuration
// error worth stopping on.
constexpr const char* kNumericNodeVars[] = {
    "WORLD_SIZE",           "RANK",          "NODE_RANK",     "MASTER_PORT",    "PET_MASTER_PORT",
    "JOB_COMPLETION_INDEX", "VC_TASK_INDEX", "VK_TASK_INDEX", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"};

// What the environment gives before any flag is applied (a flag overrides it).
absl::Status ApplyDefaults(const std::map<std::string, std::string>& env, const HostInfo& host,
                           Config* c) {
  c->restartable_exit_codes = DefaultRestartableExitCodes();
  ASSIGN_OR_RETURN(c->signals_to_handle, ParseSignalList(kDefaultSignals));
  if (auto e = env.find("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"); e != env.end()) {
    c->log_line_prefix_template = e->second;
  }
  if (host.termination_log_writable) c->termination_log = "/dev/termination-log";
  return absl::OkStatus();
}

// What the environment gives where no flag did.
absl::Status ApplyFallbacks(const std::map<std::string, std::string>& env, Config* c) {
  if (auto e = env.find("LOGLEVEL");
      c->sources.count("log-level") == 0 && e != env.end() && !e->second.empty()) {
    c->sources["log-level"] = "LOGLEVEL";
    ASSIGN_OR_RETURN(c->log_level, ParseLogLevel("LOGLEVEL", e->second));
  }
  if (auto e = env.find("PYTHON_EXEC"); e != env.end() && !e->second.empty()) {
    c->python_exec = e->second;
  }
  return absl::OkStatus();
}

// --nproc-per-node N, cpu, gpu or auto, against the host.
absl::Status ResolveNproc(const HostInfo& host, Config* c) {
  const std::string& v = c->nproc_spec;
  std::string where = c->SourceOf("nproc-per-node");
  int n = 0;
  if (v == "cpu") {
    n = host.cpus;
  } else if (v == "gpu") {
    n = host.gpus;  // 0: the GPU probe decides at start, or the check below refuses
  } else if (v == "auto") {
    n = host.gpus > 0 ? host.gpus : host.cpus;
  } else if (v == "xpu") {
    return FlagError(where,
                     "'xpu' (torchrun: one worker per Intel GPU) is not detected by "
                     "muster, which counts NVIDIA GPUs only; give the number of workers, "
                     "e.g. --nproc-per-node 8");
  } else if (!absl::SimpleAtoi(v, &n) || n < 1) {
    return FlagError(where, absl::StrCat("'", v, "' must be a positive number, cpu, gpu or auto"));
  }
  c->nproc_per_node = n;
  if (host.gpus == 0 && host.cpus > 0 && n > host.cpus) {
    c->warnings.push_back(absl::StrCat(where, " ", n, " starts ", Plural(n, "worker", "workers"),
                                       " on ", Plural(host.cpus, "CPU", "CPUs"),
                                       " and no visible GPU: they will share the CPUs; "
                                       "--nproc-per-node cpu starts one per CPU"));
  }
  if (n == 0 && (c->probe == ProbeMode::kOff || !host.driver_may_be_present)) {
    // --nproc-per-node gpu with no /dev/nvidiaN: only the probe can still find GPUs.
    return FlagError(where,
                     "'gpu' but no GPU is visible (no NVIDIA driver, no /dev/nvidiaN, or "
                     "CUDA_VISIBLE_DEVICES empty); give a number or 'cpu'");
  }
  return absl::OkStatus();
}

// --standalone is one node with its own rendezvous: a node count or an endpoint from
// elsewhere contradicts it (torchrun ignores them, and the nodes then never meet).
absl::Status CheckStandalone(const Config& c) {
  if (!c.standalone) return absl::OkStatus();
  if (c.max_nodes > 1) {
    return FlagError(c.SourceOf("standalone"),
                     absl::StrCat("runs one node, but ", c.SourceOf("nnodes"), " asks for ",
                                  c.min_nodes == c.max_nodes ? "" : "up to ", c.max_nodes,
                                  " nodes; drop --standalone and give every node "
                                  "--rdzv-endpoint HOST:PORT"));
  }
  if (c.sources.count("rdzv-endpoint")) {
    return FlagError(c.SourceOf("standalone"),
                     absl::StrCat("serves its own rendezvous on this node; ",
                                  c.SourceOf("rdzv-endpoint"), " names another: drop one of them"));
  }
  return absl::OkStatus();
}

absl::Status CheckAcrossFlags(const std::map<std::string, std::string>& env, const Config& c) {
  if (c.module && c.no_python) {
    return FlagError("--module", "cannot be combined with --no-python (a module needs Python)");
  }
  if (c.legacy_local_rank_arg && c.no_python) {
    return FlagError(c.SourceOf("no-python"),
                     "needs --use-env under `muster launch` (torch.distributed.launch refuses "
                     "it too): the command then reads LOCAL_RANK instead of a --local-rank "
                     "argument");
  }
  for (const char* var : kNumericNodeVars) {
    auto e = env.find(var);
    if (e == env.end()) continue;
    int value = 0;
    if (!absl::SimpleAtoi(e->second, &value) || value < 0) {
      return FlagError(var, absl::StrCat("'", e->second,
                                         "' in the environment is not a non-negative integer; "
                                         "fix or unset it (operators set it per node)"));
    }
  }
  if (c.command.empty() && !c.debug) {
    return FlagError("command", "missing; usage: muster run [flags] [--] SCRIPT_OR_CMD [ARGS...]");
  }
  return absl::OkStatus();
}

// MUSTER_* variables muster reads or sets that are not `muster run` flags (MUSTER_AGENT_MARK,
// MUSTER_STACKS_*: a worker's, launch/watchdog.h, agent/diagnostics/stack_hook.h; an agent started
// inside a worker inherits them).
constexpr const char* kOtherVariables[] = {
    "MUSTER_TOKEN",         "MUSTER_LIBCUDA",    "MUSTER_LIBNVML",
    "MUSTER_LIBNCCL",       "MUSTER_AGENT_MARK", "MUSTER_STACKS_DIR",
    "MUSTER_STACKS_SIGNAL", "MUSTER_PREEMPTED",  "MUSTER_TEST_SYSFS_ROOT"};

// MUSTER_<X> variables that set no flag of `muster run` but are a typo away from one
// (MUSTER_NPROC_PER_NODES): ignored, so a warning names the variable meant. Other
// MUSTER_* names (a test harness' own) pass silently.
void WarnAboutMisspelledVariables(const std::map<std::string, std::string>& env, Config* c) {
  std::vector<std::string> names;
  for (const FlagSpec& f : kRunFlags) names.emplace_back(f.name);
  for (const auto& [var, value] : env) {
    if (var.rfind("MUSTER_", 0) != 0 ||
        std::find(std::begin(kOtherVariables), std::end(kOtherVariables), var) !=
            std::end(kOtherVariables)) {
      continue;
    }
    std::string name = absl::AsciiStrToLower(absl::StrReplaceAll(var.substr(7), {{"_", "-"}}));
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    std::string guess = ClosestName(name, names);
    if (guess.empty()) continue;
    std::string meant =
        absl::StrCat("MUSTER_", absl::AsciiStrToUpper(absl::StrReplaceAll(guess, {{"-", "_"}})));
    c->warnings.push_back(absl::StrCat(var,
                                       " is not a muster variable and is ignored; did you mean ",
                                       meant, " (--", guess, ")?"));
  }
}

// Applies each flag of `specs` that is set, in order, recording where it came from.
absl::Status ApplyFlags(const FlagValues& flags, absl::Span<const FlagSpec> specs, Config* c) {
  for (const FlagSpec& spec : specs) {
    std::optional<FlagValue> value = flags.Get(spec.name);
    if (!value) continue;
    c->sources[spec.name] = value->where;
    RETURN_IF_ERROR(spec.apply(*value, c));
  }
  return absl::OkStatus();
}

}  // namespace

const Subcommand& RunSubcommand(RunForm form) { return form == RunForm::kLaunch ? kLaunch : kRun; }

bool RunHelpRequested(const std::vector<std::string>& args) {
  return HelpRequested(args, kRunFlags);
}

std::string RunHelp() { return SubcommandHelp(kRun); }

absl::StatusOr<Config> ParseRunFlags(const FlagValues& flags, const HostInfo& host, RunForm form) {
  const std::map<std::string, std::string>& env = flags.env();
  Config c;
  c.command = flags.rest();
  c.legacy_local_rank_arg = form == RunForm::kLaunch;  // --use-env turns it off
  RETURN_IF_ERROR(ApplyDefaults(env, host, &c));
  // The operator conventions complete the rendezvous flags before the rest is applied:
  // they read PET_MASTER_ADDR:PET_MASTER_PORT as the rendezvous endpoint, and their errors
  // about it come before --master-addr/--master-port's (the same variables' PET_ spelling).
  absl::Span<const FlagSpec> table = kRunFlags;
  RETURN_IF_ERROR(ApplyFlags(flags, table.first(kRendezvousEnd), &c));
  RETURN_IF_ERROR(CheckStandalone(c));
  RETURN_IF_ERROR(FinishRendezvousFlags(env, host.hostname, &c));
  RETURN_IF_ERROR(ApplyFlags(flags, table.subspan(kRendezvousEnd), &c));
  RETURN_IF_ERROR(FinishEtcdEndpoints(&c));  // reads --rdzv-backend
  FinishNodeRankHosting(&c);                 // reads --rdzv-backend
  RETURN_IF_ERROR(FinishStaticForm(&c));     // reads --master-addr/--master-port
  RETURN_IF_ERROR(FinishAnyFreePort(&c));
  RETURN_IF_ERROR(FinishEtcdSecurity(env, &c));
  FinishBackend(&c);  // the endpoint is final
  RETURN_IF_ERROR(ApplyFallbacks(env, &c));
  RETURN_IF_ERROR(ResolveNproc(host, &c));
  RETURN_IF_ERROR(CheckTorchrunFlags(env, c));
  RETURN_IF_ERROR(CheckAcrossFlags(env, c));
  WarnAboutMisspelledVariables(env, &c);
  return c;
}

absl::StatusOr<Config> ParseRunFlags(const std::vector<std::string>& args,
                                     const std::map<std::string, std::string>& env,
                                     const HostInfo& host, RunForm form) {
  ASSIGN_OR_RETURN(
      SplitArgs split,
      SplitFlags(args, kRunFlags, form == RunForm::kLaunch ? "muster launch" : "muster run"));
  return ParseRunFlags(FlagValues(std::move(split), env), host, form);
}

}  // namespace muster
