// RunPlan: what `muster run` will do, settled once before anything starts and never
// changed afterwards (docs/design.md "From flags to a plan"). The flags become a Config
// (ParseRunFlags, then CheckRunConfig against the filesystem); main's one resolve step finds
// what only the host can say (the GPU probe, NUMA placement, the workers' torch, the
// environment) as a WorkerPlan, and ResolveRunPlan freezes both with the run id, the
// rendezvous plan and the output plan. The wiring, the Agent and its components read the plan
// by const reference.
#ifndef MUSTER_AGENT_CONFIG_RUN_PLAN_H_
#define MUSTER_AGENT_CONFIG_RUN_PLAN_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/torch_version.h"
#include "base/endpoint.h"
#include "launch/numa_binding.h"
#include "nlohmann/json.hpp"
#include "rendezvous/backend.h"

namespace muster {

// How this agent takes part in the rendezvous: decided once, from the flags and this
// host's names and addresses (one look at them: agent/config/this_host.h).
struct RendezvousPlan {
  rdzv::Backend backend = rdzv::Backend::kInProcess;  // rendezvous/backend.h
  // The endpoint as parsed from the flags (host without brackets); for etcd its first
  // member; empty host in-process. Parsed once: nothing turns it into text and back (the
  // transports get text only where gRPC wants its target).
  Endpoint endpoint;
  // etcd: every member, parsed (endpoint is the first); empty otherwise.
  std::vector<Endpoint> etcd_members;
  // gRPC: whether the endpoint's host names this machine. Looked up only where it decides
  // something (--rdzv-host auto or false); false otherwise.
  bool endpoint_is_this_host = false;
  // gRPC: whether this agent tries to serve the rendezvous (--rdzv-host true, or auto and
  // the endpoint names this machine). Never with etcd: the endpoint is etcd's.
  bool hosts_here = false;
  // --store agent and this agent may be group rank 0 (agent/config/listen_address.h
  // NeverServesStore): it opens a store each round.
  bool opens_store = false;
};

// What the workers get from this host rather than from the flags, found by the resolve step
// (agent/cli/main.cc) before the first round; the worker specs read it beside the Config
// (agent/workers/worker_specs.h).
struct WorkerPlan {
  // How many workers this node runs: the flags' count (Config::nproc_per_node), or for
  // `--nproc-per-node gpu`/`auto` the GPUs the probe found (agent/diagnostics/gpu_probe.h).
  int nproc = 1;
  // --numa-binding (agent/workers/numa_setup.h): local rank N's CPUs and node, one per local
  // rank; empty without the flag. numa_memory: whether workers may be given a memory policy.
  std::vector<NumaPlacement> numa_placements;
  bool numa_memory = false;
  // The torch the workers import (agent/workers/worker_torch.h); nullopt when unknown (no
  // Python, no torch, a command that is not Python).
  std::optional<TorchVersion> torch;
  // The environment workers inherit (the agent's own), before the torchrun set is added.
  std::map<std::string, std::string> env_base;
};

// Where one stream of a worker goes.
struct StreamRoute {
  bool to_file = false;  // <worker dir>/stdout.log or stderr.log
  bool to_console = true;
};

// Where the workers' output goes (-r, -t, --local-ranks-filter, --log-dir), decided once for
// each local rank.
struct OutputPlan {
  struct Rank {
    StreamRoute out, err;
  };
  std::vector<Rank> ranks;  // one per local rank (WorkerPlan::nproc)
  // -r/-t send some worker's stream to a file (`-r 0` sends none): the run directory then
  // goes to disk rather than tmpfs and is kept after a failed job (agent/lifecycle/run_dir.h).
  bool stream_files = false;
};

struct RunPlan {
  // The flags as parsed and checked; nothing after the parse writes it.
  Config config;
  // The job's id: --rdzv-id, or a fresh UUID for --standalone without one (torchrun's rule).
  std::string run_id;
  RendezvousPlan rendezvous;
  WorkerPlan workers;
  OutputPlan output;
  // The GPU probe's report at start (agent/diagnostics/gpu_probe.h), for the status file
  // and the job status; null when the probe did not run.
  nlohmann::json probe_report;
};

// The last part of the resolve step: the run id, the rendezvous plan and the output plan,
// from `config` (which must be complete: nothing changes it afterwards), with the workers'
// plan and the probe's report. Looks at this host's names and addresses at most once (IsThisHost).
RunPlan ResolveRunPlan(Config config, WorkerPlan workers = {},
                       nlohmann::json probe_report = nullptr);

}  // namespace muster

#endif  // MUSTER_AGENT_CONFIG_RUN_PLAN_H_
