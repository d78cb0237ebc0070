#include "agent/workers/worker_specs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/diagnostics/flight_recorder.h"
#include "agent/diagnostics/stack_hook.h"
#include "agent/preempt/preempt_notice.h"

namespace muster {
namespace {

// The output plan's routes for one local rank: which streams go to the console and which
// to files in the worker's directory.
void RouteStreams(const OutputPlan::Rank& routes, WorkerSpec& spec) {
  for (int bit : {1, 2}) {
    StreamOptions& s = bit == 1 ? spec.out : spec.err;
    const StreamRoute& route = bit == 1 ? routes.out : routes.err;
    if (route.to_file) s.file = absl::StrCat(spec.dir, bit == 1 ? "/stdout.log" : "/stderr.log");
    s.to_console = route.to_console;
  }
}

}  // namespace

bool NeedsFreeMasterPort(const Config& config) {
  if (config.store == StoreOwner::kAgent || config.max_nodes > 1) return false;
  return config.master_port_given ? config.master_port == 0 : config.standalone;
}

std::string AdvertisedAddress(const Config& c) {
  if (c.rdzv_host_name.empty()) return c.master_addr;
  if (c.local_addr.empty() && c.rdzv_host_name == "localhost") return c.rdzv_host_name;
  // Static form: node rank 0 is --master-addr, as every node reached it and as torchrun
  // gives it to the workers.
  if (c.local_addr.empty() && c.static_rendezvous && c.node_rank == 0) return c.master_addr;
  return c.local_addr;
}

int FixedStorePort(const Config& config) {
  return config.store == StoreOwner::kAgent && config.max_nodes == 1 && config.master_port_given
             ? config.master_port
             : 0;
}

NodeRound PlanNodeRound(const Config& config, const rdzv::Assignment& a, const std::string& run_id,
                        int free_port) {
  NodeRound round{.group_rank = a.group_rank,
                  .group_world_size = a.group_world_size,
                  .rank_base = a.rank_base,
                  .world_size = a.world_size};
  RoundInfo& info = round.info;
  info.restart_count = a.restart_count;
  info.run_id = run_id;
  info.use_agent_store = config.store == StoreOwner::kAgent;
  if (info.use_agent_store) {
    // The store of the agent of group rank 0, as the rendezvous announced it.
    info.master_addr = a.master_addr;
    info.master_port = a.master_port;
  } else {
    // torchrun's static store: worker rank 0 binds --master-port.
    info.master_addr = config.max_nodes == 1 ? config.master_addr : a.master_addr;
    info.master_port = NeedsFreeMasterPort(config) ? free_port : config.master_port;
  }
  return round;
}

std::vector<WorkerSpec> BuildWorkerSpecs(const RunPlan& plan, const NodeRound& round,
                                         const std::string& run_dir, const std::string& hostname,
                                         const CpuLayout& cpus) {
  const Config& config = plan.config;
  const WorkerPlan& workers = plan.workers;
  const int n = workers.nproc;
  const std::string attempt_dir = absl::StrCat(run_dir, "/attempt_", round.info.restart_count);
  std::vector<WorkerSpec> specs(n);
  for (int local = 0; local < n; ++local) {
    WorkerSpec& spec = specs[local];
    int rank = round.rank_base + local;
    spec.placement = WorkerPlacement{.local_rank = local,
                                     .rank = rank,
                                     .group_rank = round.group_rank,
                                     .group_world_size = round.group_world_size,
                                     .local_world_size = n,
                                     .world_size = round.world_size,
                                     .role_rank = rank,
                                     .role_world_size = round.world_size};
    spec.dir = absl::StrCat(attempt_dir, "/", local);
    spec.error_file = spec.dir + "/error.json";
    spec.output_prefix =
        ExpandPrefix(config.log_line_prefix_template, config.role, spec.placement, hostname);
    RouteStreams(plan.output.ranks[local], spec);

    RoundInfo info = round.info;
    info.error_file = spec.error_file;
    spec.spawn.argv = BuildWorkerArgv(config, workers, config.virtual_local_rank ? 0 : local);
    spec.spawn.env = BuildWorkerEnv(config, workers, spec.placement, info);
    if (!config.no_stack_hook) AddStackHookEnv(run_dir, spec.dir, &spec.spawn.env);
    AddPreemptEnv(spec.dir, &spec.spawn.env);
    AddFlightRecorderEnv(attempt_dir, workers.torch, &spec.spawn.env);
    if (!workers.numa_placements.empty()) {  // --numa-binding (agent/workers/numa_setup.h)
      const NumaPlacement& near_gpu = workers.numa_placements[local];
      spec.spawn.cpus = near_gpu.cpus;
      if (workers.numa_memory) spec.spawn.preferred_memory_node = near_gpu.node;
    }
    if (config.bind_cores_to_rank) {
      spec.spawn.cpus = CpuShare(cpus.available, cpus.numa_of, local, n);
      if (!spec.spawn.cpus.empty() && !workers.env_base.count("OMP_NUM_THREADS")) {
        // As DeepSpeed's launcher does when it binds cores: one OpenMP thread per CPU of
        // the rank's share, instead of torchrun's 1 (which would leave a bound share idle).
        std::erase_if(spec.spawn.env,
                      [](const std::string& kv) { return kv.starts_with("OMP_NUM_THREADS="); });
        auto at =
            std::lower_bound(spec.spawn.env.begin(), spec.spawn.env.end(), "OMP_NUM_THREADS=");
        spec.spawn.env.insert(at, absl::StrCat("OMP_NUM_THREADS=", spec.spawn.cpus.size()));
      }
    }
  }
  return specs;
}

}  // namespace muster
