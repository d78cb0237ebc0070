// The environment and command line of one worker: exactly what torchrun gives
// (reference/torch_contract.md §2.1-2.2, docs/design.md §4.1), plus NODE_RANK, DeepSpeed's
// per-node names and PYTHONUNBUFFERED=1 (unless the user set it). Pure
// functions.
#ifndef MUSTER_AGENT_WORKER_ENV_H_
#define MUSTER_AGENT_WORKER_ENV_H_

#include <map>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/run_plan.h"
#include "launch/worker_spec.h"

namespace muster {

// What the round gives every worker.
struct RoundInfo {
  int restart_count = 0;
  std::string master_addr;
  int master_port = 0;
  std::string run_id;
  bool use_agent_store = false;
  std::string error_file;  // this worker's TORCHELASTIC_ERROR_FILE
};

// The agent's environment (WorkerPlan::env_base), updated with the torchrun set. Sorted
// "NAME=value" strings. With --virtual-local-rank, LOCAL_RANK is 0 and CUDA_VISIBLE_DEVICES
// the worker's own device (VirtualLocalDevice), as torchrun.
std::vector<std::string> BuildWorkerEnv(const Config& config, const WorkerPlan& workers,
                                        const WorkerPlacement& placement, const RoundInfo& round);

// [python, -u, (-m), script, args...] or the command itself with --no-python; `muster
// launch` (without --use-env) appends "--local-rank=N" as torch.distributed.launch does
// ("--local_rank=N" for torch 1.x workers: WorkerPlan::torch), and --local-rank-arg
// "--local_rank=N" (DeepSpeed's launcher does that). N is the worker's LOCAL_RANK, so 0
// under --virtual-local-rank.
std::vector<std::string> BuildWorkerArgv(const Config& config, const WorkerPlan& workers,
                                         int local_rank = 0);

// --bind-cores-to-rank: the CPUs of `local_rank`'s share. `available` are the CPUs to split
// (--bind-core-list, else the agent's affinity) and `numa_of` maps a CPU to its NUMA node
// (empty when the topology is unknown); shares are contiguous in (NUMA node, CPU) order,
// so an even split never straddles nodes. Every rank gets at least one CPU when there are
// enough; the remainder goes to the first ranks.
std::vector<int> CpuShare(const std::vector<int>& available, const std::map<int, int>& numa_of,
                          int local_rank, int local_world_size);

// Expands ${role_name} ${local_rank} ${rank} ${hostname} in the console prefix
// template.
std::string ExpandPrefix(const std::string& tmpl, const std::string& role,
                         const WorkerPlacement& placement, const std::string& hostname);

}  // namespace muster

#endif  // MUSTER_AGENT_WORKER_ENV_H_
