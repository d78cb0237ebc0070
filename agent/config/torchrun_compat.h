// torchrun's flags and --rdzv-conf keys (torch/distributed/run.py, torch 2.15) that muster
// has no flag or key of its own for. Each is accepted where muster does what torchrun does,
// or refused (exit 2) saying why and what to use instead where it cannot;
// docs/reference/torchrun-compat.md lists every torchrun flag and which way it went.
// kTorchrunFlags joins the end of `muster run`'s flag table (run_flags.cc), so --run-path is
// applied after --module and --no-python, which it overrides as in torchrun.
// Thread-safe (constant data, pure functions).
#ifndef MUSTER_AGENT_TORCHRUN_COMPAT_H_
#define MUSTER_AGENT_TORCHRUN_COMPAT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/config/config.h"
#include "agent/config/flag_table.h"
#include "agent/config/run_flag_steps.h"

namespace muster {

// --start-method spawn|fork|forkserver: checked, then without effect. torchrun's choice
// matters only for a Python function entrypoint; a script (all torchrun runs from its
// command line) is a fresh process either way, as every muster worker is.
absl::Status CheckStartMethod(const FlagValue& value, Config* config);
// --run-path: the script runs as the worker's __main__ under Python (torchrun's
// runpy.run_path does the same in a spawned interpreter); as in torchrun it wins over
// --module and --no-python.
absl::Status ApplyRunPath(const FlagValue& value, Config* config);
// --use-env (torch.distributed.launch's): `muster launch` then passes no --local-rank=N
// argument; under `muster run`, which never passes one, it is the no-op it is in torchrun.
absl::Status ApplyUseEnv(const FlagValue& value, Config* config);
// --event-log-handler: torchrun's handlers (null, console, dynamic_rendezvous) are
// accepted without effect; any other name (a handler registered in Python) is refused,
// naming --event-log FILE.
absl::Status CheckEventLogHandler(const FlagValue& value, Config* config);
// --logs-specs: `default` (torch's own DefaultLogsSpecs entry point, the per-rank layout
// muster writes) is accepted without effect; any other name (a Python LogsSpecs plugin) is
// refused, saying what to use instead.
absl::Status CheckLogsSpecs(const FlagValue& value, Config* config);
// --numa-binding node|socket|exclusive|core-complex: each local rank N runs on CPUs near
// GPU N (launch/numa_binding.h), resolved after the GPU probe (agent/workers/numa_setup.h).
absl::Status ApplyNumaBinding(const FlagValue& value, Config* config);
// torchrun's flags muster refuses: duplicated output filters, shell completion. Each error
// says what to use instead.
absl::Status RefuseDuplicateFilters(const FlagValue& value, Config* config);
absl::Status RefusePrintCompletion(const FlagValue& value, Config* config);

inline constexpr char kRefusedGroup[] = "torchrun flags muster refuses (exit 2)";

inline constexpr FlagSpec kTorchrunFlags[] = {
    {.name = "virtual-local-rank",
     .takes_value = false,
     .group = "Job",
     .default_text = "off",
     .help = "every worker gets LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES = its own GPU",
     .apply = SetSwitch<&Config::virtual_local_rank>},
    {.name = "start-method",
     .group = "Command",
     .default_text = "spawn",
     .help = "spawn, fork or forkserver: no effect, every worker is a fresh process",
     .apply = CheckStartMethod},
    {.name = "run-path",
     .takes_value = false,
     .group = "Command",
     .default_text = "off",
     .help = "run the script as Python's __main__ (torchrun's runpy); wins over -m, --no-python",
     .apply = ApplyRunPath},
    {.name = "use-env",
     .takes_value = false,
     .group = "Command",
     .default_text = "off",
     .help = "muster launch: LOCAL_RANK only, no --local-rank=N argument; muster run: no "
             "effect, as in torchrun",
     .apply = ApplyUseEnv},
    {.name = "event-log-handler",
     .group = "Output",
     .default_text = "null",
     .help = "null, console or dynamic_rendezvous: no effect; muster's events: --event-log",
     .apply = CheckEventLogHandler},
    {.name = "logs-specs",
     .group = "Output",
     .default_text = "default",
     .help = "default (torch's layout, muster's): no effect; a Python plugin is refused: use "
             "--log-dir, -r, -t, --local-ranks-filter",
     .apply = CheckLogsSpecs},
    {.name = "numa-binding",
     .group = "Job",
     .default_text = "off",
     .help = "node, socket, exclusive or core-complex: run local rank N on CPUs near GPU N "
             "and prefer its NUMA node's memory",
     .apply = ApplyNumaBinding},
    {.name = "duplicate-stdout-filters",
     .group = kRefusedGroup,
     .default_text = "",
     .help = "use --log-dir with -t and filter the per-rank logs",
     .apply = RefuseDuplicateFilters},
    {.name = "duplicate-stderr-filters",
     .group = kRefusedGroup,
     .default_text = "",
     .help = "use --log-dir with -t and filter the per-rank logs",
     .apply = RefuseDuplicateFilters},
    {.name = "print-completion",
     .group = kRefusedGroup,
     .default_text = "",
     .help = "no completion script; this --help lists every flag",
     .apply = RefusePrintCompletion},
};

// torch's --rdzv-conf keys that are not muster's own (rendezvous_flags.cc has those and
// torch's names for them): the static backend's `rank` (a node rank hint, as --node-rank,
// which wins), the c10d backend's `store_type` (tcp) and `use_libuv`, checked and unused
// (muster serves its own rendezvous and store), and the etcd backends' keys: etcd_prefix,
// and protocol, TLS and user keys (agent/config/etcd_security_flags.h). nullopt when `key` is
// none of them.
std::optional<absl::Status> ApplyTorchRdzvConfKey(const std::string& where, const std::string& key,
                                                  const std::string& value, Config* config);

// --virtual-local-rank, as torchrun: the devices handed out one per local rank are the
// entries of the agent's CUDA_VISIBLE_DEVICES (split at ',', blanks stripped); nullopt when
// it is unset, and then local rank N gets device N.
std::optional<std::vector<std::string>> VirtualLocalDevices(
    const std::map<std::string, std::string>& agent_env);
// Worker `local_rank`'s CUDA_VISIBLE_DEVICES under --virtual-local-rank ("" past the end of
// the list, which CheckTorchrunFlags refuses up front).
std::string VirtualLocalDevice(const std::map<std::string, std::string>& agent_env, int local_rank);

// After --nproc-per-node is resolved: with --virtual-local-rank, CUDA_VISIBLE_DEVICES (when
// set) lists a device for every local worker (torchrun fails each worker past its end);
// --numa-binding and --bind-cores-to-rank (or --bind-core-list) do not both place CPUs.
absl::Status CheckTorchrunFlags(const std::map<std::string, std::string>& env,
                                const Config& config);

}  // namespace muster

#endif  // MUSTER_AGENT_TORCHRUN_COMPAT_H_
