// Config: what `muster run` read from flags, MUSTER_* / PET_* variables and defaults
// (docs/design.md §1 precedence). Plain data; built once by ParseRunFlags
// (agent/config/run_flags.h), checked against the host by CheckRunConfig, then frozen into a
// RunPlan (agent/config/run_plan.h) beside what the resolve step found (the WorkerPlan);
// nothing changes it afterwards (docs/design.md "From flags to a plan").
#ifndef MUSTER_AGENT_CONFIG_H_
#define MUSTER_AGENT_CONFIG_H_

#include <signal.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "base/endpoint.h"
#include "launch/containment.h"
#include "launch/numa_binding.h"
#include "launch/restart_policy.h"
#include "nlohmann/json.hpp"
#include "rendezvous/backend.h"

namespace muster {

// Which of a worker's streams (1 stdout, 2 stderr, 3 both) a -r/-t value
// selects, per local rank; kAllRanks applies to every rank.
struct StreamSelection {
  static constexpr int kAllRanks = -1;
  std::map<int, int> by_rank;  // local rank (or kAllRanks) -> bitmask 0..3
  int For(int local_rank) const;
};

// --probe: whether the agent runs muster-probe before the first rendezvous (docs/design.md §4.9).
enum class ProbeMode {
  kOff,
  kAuto,  // inventory when a GPU driver may be present, else nothing
  kInventory,
  kNccl,  // inventory and an all-reduce over the node's GPUs
};

// --stale-gpu-policy: what to do about GPUs that processes outside the job hold at start.
enum class StaleGpuPolicy { kFail, kWait, kKill };

// --store: who serves the c10d store.
enum class StoreOwner {
  kAgent,  // this agent, a fresh port each attempt (TORCHELASTIC_USE_AGENT_STORE=True)
  kRank0,  // worker rank 0 binds --master-port (torchrun's static behaviour)
};

// --rdzv-host (or --rdzv-conf is_host): whether this agent serves the rendezvous.
enum class RdzvHosting {
  kAuto,    // when the endpoint names this node
  kAlways,  // "true"
  kNever,   // "false"
};

// Each mode's name as flags spell it (and --dry-run and the logs print it), and back.
// Parse returns nullopt for a name that is not one of them; ModeNames lists them for an
// error message ("off, auto, inventory or nccl").
const char* ModeName(ProbeMode mode);
const char* ModeName(StaleGpuPolicy policy);
const char* ModeName(StoreOwner store);
const char* ModeName(RdzvHosting hosting);
template <typename Mode>
std::optional<Mode> ParseMode(std::string_view name);
template <typename Mode>
std::string ModeNames();

// How the etcd backend reaches etcd (docs/guides/etcd.md "Security";
// agent/config/etcd_security_flags.cc): the --rdzv-conf keys as given, then, once the flags are in,
// the files' contents.
struct EtcdAccess {
  bool tls = false;               // protocol=https
  std::string cacert, cert, key;  // paths (torch's cacert/ca_cert, cert/ssl_cert, ...)
  std::string username;           // an etcd user
  std::string password_file;      // its password's file; else MUSTER_ETCD_PASSWORD
  std::string ca_pem, cert_pem, key_pem;
  std::string password;  // never printed or logged
};

struct Config {
  // What each worker runs.
  std::vector<std::string> command;  // training script (or module / program) and its args
  bool module = false;               // -m: python -u -m MODULE
  bool no_python = false;            // --no-python: exec the command directly
  // --warm-start: ranks forked from a template that imported `preload` once
  // (launch/warm_source.h); off: each rank execs the interpreter.
  bool warm_start = false;
  std::vector<std::string> preload = {"torch"};
  bool local_rank_arg = false;  // --local-rank-arg: append --local_rank=N (DeepSpeed)
  // `muster launch` without --use-env: append torch.distributed.launch's --local-rank=N,
  // spelled for the workers' torch (agent/workers/torch_names.h).
  bool legacy_local_rank_arg = false;
  bool virtual_local_rank = false;  // LOCAL_RANK=0, CUDA_VISIBLE_DEVICES = the worker's own GPU
  bool bind_cores_to_rank = false;  // give each local rank its own share of CPUs
  std::vector<int> bind_core_list;  // CPUs to split (empty: the agent's affinity)
  std::optional<NumaBindingMode> numa_binding;  // --numa-binding: CPUs near each rank's GPU
  std::string save_pid;                         // --save-pid FILE: the agent's pid
  std::string hostfile;  // --hostfile FILE: DeepSpeed-style "host slots=N" per round
  std::string python_exec = "python3";

  // Shape of the job.
  int min_nodes = 1, max_nodes = 1;
  int spares = 0;  // --spares: hot spares beyond max_nodes; 0: no limit (docs/guides/spares.md)
  std::string nproc_spec = "1";  // as given: N, cpu, gpu or auto
  // As parsed: N, or the host's count for cpu/gpu/auto (0: gpu with no GPU seen yet). The
  // count the workers run with is WorkerPlan::nproc (the probe may count GPUs for gpu/auto).
  int nproc_per_node = 1;
  std::string role = "default";
  bool standalone = false;
  std::string run_id = "none";  // --rdzv-id as given; the run's own is RunPlan::run_id
  StoreOwner store = StoreOwner::kAgent;
  // --store-max-bytes: what the agent's store may hold; unset: c10d::Limits' default.
  std::optional<uint64_t> store_max_bytes;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool master_port_given = false;

  // Multi-node rendezvous (docs/design.md §4.3).
  std::string rdzv_host_name;  // --rdzv-endpoint host; empty: in-process (one node)
  // torchrun's static form: no --rdzv-endpoint, so the rendezvous is at
  // --master-addr:--master-port, served by node rank 0 (rendezvous_flags.cc).
  bool static_rendezvous = false;
  int rdzv_port = 29400;
  // What carries the rendezvous (rendezvous/backend.h): what --rdzv-backend names (kGrpc or
  // kEtcd) until FinishBackend (rendezvous_flags.h), the one place that picks kInProcess.
  // kEtcd: the rendezvous is etcd at rdzv_endpoints (docs/guides/etcd.md);
  // rdzv_host_name/rdzv_port are then the first member.
  rdzv::Backend rdzv_backend = rdzv::Backend::kGrpc;
  EtcdAccess etcd_access;  // --rdzv-conf protocol, cacert, cert, key, username, password_file
  std::string rdzv_endpoint_text;                 // --rdzv-endpoint as given (several for etcd)
  std::vector<Endpoint> rdzv_endpoints;           // etcd members, parsed once
  std::string etcd_prefix = "/muster";            // --rdzv-conf etcd_prefix
  RdzvHosting rdzv_hosting = RdzvHosting::kAuto;  // embed the rendezvous server here
  int node_rank = -1;                             // --node-rank hint; -1: assigned by arrival
  std::string local_addr;  // --local-addr / POD_IP: the address other nodes reach
  absl::Duration join_timeout = absl::Seconds(600);
  absl::Duration last_call_timeout = absl::Seconds(30);
  absl::Duration heartbeat_interval = absl::Seconds(5);
  int heartbeat_misses = 3;
  std::string token;       // MUSTER_TOKEN or --token-file contents; never printed
  std::string convention;  // operator convention detected in the environment, if any
  std::string tls_cert, tls_key, tls_ca;

  // Failure handling.
  int max_restarts = 0;
  RestartPolicy restart_policy = RestartPolicy::kOnFailure;  // torchrun's rule
  std::set<int> restartable_exit_codes;
  // --fatal-exit-code: the agent's exit code when the job fails for good (a worker's failure
  // that is not restartable, or the budget spent); unset: the root cause's own code.
  std::optional<int> fatal_exit_code;
  absl::Duration shutdown_timeout = absl::Seconds(30);
  // --restart-grace: SIGTERM to SIGKILL when the workers are stopped for a next round
  // (unset: shutdown_timeout, the grace of a stop for a signal or the job's end).
  std::optional<absl::Duration> restart_grace;
  absl::Duration RestartGrace() const { return restart_grace.value_or(shutdown_timeout); }
  // --exit-barrier-timeout (or --rdzv-conf exit_barrier_timeout): how long a node whose
  // workers all exited 0 waits for the job's word before it leaves with 138; 0: as long as
  // the job lives (docs/guides/stopping-workers.md).
  absl::Duration exit_barrier_timeout = absl::ZeroDuration();
  // Preemption (docs/guides/preemption.md): the signal workers get with the notice (0: none, the
  // MUSTER_PREEMPTED file only), how long they may take to exit on their own (capped at
  // shutdown_timeout), and a file whose appearance preempts this node ("": none).
  int preempt_signal = SIGUSR1;
  absl::Duration preempt_grace = absl::Seconds(20);
  std::string preempt_file;
  std::vector<int> signals_to_handle;
  Containment containment = Containment::kAuto;  // launch/containment.h
  bool allow_cgroup_escape =
      false;  // --allow-cgroup-escape: mode cgroup with workers that can leave
  // Hang detection (agent/diagnostics/hang_watch.h): zero is off; a hang restarts the job (within
  // the budget) unless --hang-action fail.
  absl::Duration hang_timeout = absl::ZeroDuration();
  bool hang_restart = true;
  // Stragglers (agent/diagnostics/straggler_watch.h): a zero window is off; every interval each
  // agent samples its ranks' stacks; a rank the others wait for in >= share of the window's
  // samples is named.
  absl::Duration straggler_window = absl::ZeroDuration();
  absl::Duration straggler_interval = absl::Seconds(1);
  double straggler_share = 0.4;

  // Output.
  std::string log_dir;  // empty: a temporary directory, removed at exit
  StreamSelection redirects, tee;
  std::set<int> local_ranks_filter;  // empty: all ranks on the console
  std::string log_line_prefix_template = "[${role_name}${local_rank}]:";
  std::string log_level = "info";
  std::string event_log;        // JSON lines of the agent's transitions; empty: none
  std::string status_file;      // JSON, replaced atomically on each transition; empty: none
  std::string termination_log;  // one line with the outcome at exit; empty: none
  int health_port = -1;         // grpc.health.v1; -1: none
  int metrics_port = -1;        // Prometheus /metrics; -1: none
  bool no_stack_hook = false;   // --no-stack-hook: workers get no sitecustomize (stack_hook.h)

  // Health gate before every round (docs/guides/health-gate.md): a shell command whose exit
  // 0 means healthy ("": none), its deadline, and the free space the run dir must keep
  // (0: not checked).
  std::string health_check;
  absl::Duration health_check_timeout = absl::Seconds(30);
  uint64_t health_min_free_bytes = uint64_t{100} << 20;
  // How often a hot spare runs these checks while it waits (docs/guides/spares.md); zero:
  // only before its join.
  absl::Duration spare_check_interval = absl::Seconds(30);
  // Bad-node memory (docs/guides/health-gate.md "Bad-node memory"): a host where the root
  // cause of this many failed attempts was found is quarantined for the rest of the job
  // when the next round can form without it (0: never).
  int quarantine_after = 2;

  // GPU probe (docs/design.md §4.9).
  ProbeMode probe = ProbeMode::kAuto;
  StaleGpuPolicy stale_gpu_policy = StaleGpuPolicy::kFail;
  absl::Duration probe_timeout = absl::Seconds(30);

  // Debug mode (docs/design.md §4.7): rendezvous, write per-rank env files and a hostfile, then run
  // debug_command instead of the workers; `muster exec --rank N` starts a rank by hand.
  bool debug = false;
  std::string debug_command;  // empty: /usr/sbin/sshd -D -e when present, else sleep infinity
  std::string debug_dir = "/run/muster";
  int debug_port = 22;  // the default sshd's port

  bool dry_run = false;
  // Where each value came from, for --dry-run ("flag", "MUSTER_NNODES",
  // "PET_NNODES").
  std::map<std::string, std::string> sources;
  // What parsing noticed that is not an error (a misspelled MUSTER_* variable, more workers
  // than CPUs): `muster run` prints each before it starts, --dry-run included.
  std::vector<std::string> warnings;

  // Where `flag` (a name without dashes) came from, for messages: its source when it was
  // given, else "--flag".
  std::string SourceOf(const char* flag) const;
};

}  // namespace muster

#endif  // MUSTER_AGENT_CONFIG_H_
