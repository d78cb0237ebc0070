// RendezvousBackend: one object per rdzv::Backend (rendezvous/backend.h) that serves both
// `muster run` (the rendezvous client, and the server where this node hosts it) and the
// commands that ask about a running job (`muster status` and its --watch, `muster stacks`,
// `muster drain`). Neither the wiring nor a command branches on the backend: they ask
// BackendFor(backend). Adding a backend is its file in this folder and one row in
// backend_table.cc (docs/design.md §4.3). The objects hold nothing; thread-safe.
#ifndef MUSTER_AGENT_CLI_BACKENDS_RENDEZVOUS_BACKEND_H_
#define MUSTER_AGENT_CLI_BACKENDS_RENDEZVOUS_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/config/flag_table.h"
#include "agent/config/run_plan.h"
#include "agent/lifecycle/agent_parts.h"
#include "metrics/metrics_server.h"
#include "rendezvous/backend.h"
#include "rendezvous/c10d/store_server.h"
#include "rendezvous/core/job_status.h"
#include "rendezvous/core/stacks.h"
#include "rendezvous/core/types.h"

namespace muster {

// What `muster run`'s wiring (agent/cli/wiring.cc) hands a backend.
struct RunWiring {
  // The run's plan: its rendezvous part (endpoint, whether this node hosts it) is decided
  // there, once (agent/config/run_plan.h); a backend reads it and decides nothing again.
  const RunPlan& plan;
  // The numeric address this node's store listens on, and a rendezvous it hosts
  // (agent/config/listen_address.h); empty where it opens neither.
  std::string store_address;
  metrics::MetricsServer* metrics_server = nullptr;         // null without --metrics-port
  std::shared_ptr<std::atomic<int64_t>> store_connections;  // null without --metrics-port
  c10d::Limits store_limits;                                // --store-max-bytes
  // A job-wide `muster stacks` reaching this node: collect its ranks' stacks within the
  // timeout and reply (from any thread).
  std::function<void(absl::Duration timeout,
                     std::function<void(std::vector<rdzv::RankStack> ranks)> reply)>
      on_stacks_request;
};

// The command a failure line is for (JobQuery::From).
enum class QueryCommand { kStatus, kStacks, kDrain };

// One job (or, with muster's own server and no --rdzv-id, one server), reached through its
// backend by a query command. Each call blocks up to the command's --timeout.
class JobQuery {
 public:
  virtual ~JobQuery() = default;
  // --rdzv-id; empty when none was given (only muster's own server then lists its jobs).
  virtual const std::string& run_id() const = 0;
  // What answers, as messages name it: "HOST:PORT" of the server, or "etcd H1:2379,...".
  virtual std::string Where() const = 0;
  // How `command`'s failure line names it after "cannot get job ID", "cannot get the stacks
  // of job ID", "cannot drain NODE of job ID": "from HOST:PORT", "at HOST:PORT", ...
  virtual std::string From(QueryCommand command) const;

  // `muster status` without --rdzv-id: every job the server knows.
  virtual absl::StatusOr<std::vector<rdzv::JobSummary>> ListJobs() = 0;
  virtual absl::StatusOr<rdzv::JobStatusSnapshot> Status() = 0;
  // `muster status --watch`: `on_change` for each new status until the job ends.
  virtual absl::Status Watch(
      const std::function<void(const rdzv::JobStatusSnapshot&)>& on_change) = 0;
  // Every node's stacks (docs/guides/hangs-and-stacks.md), each agent given `collect`.
  virtual absl::StatusOr<std::vector<rdzv::NodeStacks>> Stacks(absl::Duration collect) = 0;
  // Preempts `node_id` (or the node on `host`): docs/guides/preemption.md.
  virtual absl::StatusOr<rdzv::NodeInfo> Drain(const std::string& node_id, const std::string& host,
                                               const std::string& reason) = 0;
};

class RendezvousBackend {
 public:
  virtual ~RendezvousBackend() = default;

  // `muster run`: sets parts.rendezvous, and where the plan says this node hosts the
  // rendezvous (RendezvousPlan::hosts_here), parts.hosted_rendezvous and the store the
  // hosted server shares its port with.
  virtual absl::Status Wire(const RunWiring& run, AgentParts& parts) const = 0;

  // A query command: the job its flags name (--rdzv-endpoint, --rdzv-id, kJobQueryFlags:
  // agent/cli/job_query.h). InvalidArgument naming the flag and the fix (a usage error).
  virtual absl::StatusOr<std::unique_ptr<JobQuery>> Query(const FlagValues& values) const = 0;
};

// The registry (backend_table.cc).
const RendezvousBackend& BackendFor(rdzv::Backend backend);

// A query command's backend, from --rdzv-backend (muster's own rendezvous without it);
// InvalidArgument naming the flag for a word it does not take.
absl::StatusOr<const RendezvousBackend*> BackendFromFlags(const FlagValues& values);

// Each backend's object, defined in its own file in this folder.
const RendezvousBackend& InProcessBackend();
const RendezvousBackend& GrpcBackend();
const RendezvousBackend& EtcdBackend();

}  // namespace muster

#endif  // MUSTER_AGENT_CLI_BACKENDS_RENDEZVOUS_BACKEND_H_
