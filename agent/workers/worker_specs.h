// What each of this node's workers gets in one round — argv, environment, CPU share,
// directories, console prefix and log files — decided in one pure function from the
// config, the worker plan (agent/config/run_plan.h), the round and the run directory. The agent
// hands the specs to its launcher; debug mode writes the very same specs to rank-N.env /
// rank-N.argv, so a rank started by hand gets what the worker would have got. Thread-safe (no
// state).
#ifndef MUSTER_AGENT_WORKER_SPECS_H_
#define MUSTER_AGENT_WORKER_SPECS_H_

#include <map>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/workers/worker_env.h"
#include "launch/worker_spec.h"
#include "rendezvous/core/types.h"

namespace muster {

// This node's part of one round.
struct NodeRound {
  int group_rank = 0;
  int group_world_size = 1;
  int rank_base = 0;  // the global rank of local rank 0
  int world_size = 1;
  RoundInfo info;  // restart count, run id, the store workers use (error_file: per worker)
};

// The CPUs --bind-cores-to-rank splits (--bind-core-list, else the agent's affinity) and
// each one's NUMA node (empty when unknown); read from the machine by the caller.
struct CpuLayout {
  std::vector<int> available;
  std::map<int, int> numa_of;
};

// True when the round's master port must be picked free on this machine first, for a static
// store (--store rank0) on one node: torchrun's --standalone without --master-port, or
// --master-port 0.
bool NeedsFreeMasterPort(const Config& config);

// The address this node gives the others (their MASTER_ADDR when it is group rank 0). One
// node: the in-process rendezvous, whose master is --master-addr. Several: --local-addr or
// POD_IP; else, when the endpoint names this machine "localhost", that name as torchrun
// gives it (every node reaches the server through it, so all run here, and a script's
// f"tcp://{MASTER_ADDR}:{MASTER_PORT}" cannot parse the ::1 the server would see); else
// empty, and the server records the address it sees this agent connect from (checked,
// never a guessed FQDN).
std::string AdvertisedAddress(const Config& config);

// The port the agent's store (--store agent) binds on every attempt: --master-port on one
// node, as torchrun's workers get MASTER_PORT=--master-port; 0 (any free port) otherwise.
int FixedStorePort(const Config& config);

// The round as this node's workers see it. `free_port` is used when NeedsFreeMasterPort.
NodeRound PlanNodeRound(const Config& config, const rdzv::Assignment& assignment,
                        const std::string& run_id, int free_port);

// One spec per local rank, in local-rank order. Directories and files are named under
// `run_dir` (attempt_<restart count>/<local rank>/), nothing is created.
std::vector<WorkerSpec> BuildWorkerSpecs(const RunPlan& plan, const NodeRound& round,
                                         const std::string& run_dir, const std::string& hostname,
                                         const CpuLayout& cpus);

}  // namespace muster

#endif  // MUSTER_AGENT_WORKER_SPECS_H_
