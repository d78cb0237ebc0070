#include "agent/config/run_plan.h"

#include <utility>

#include "agent/config/listen_address.h"
#include "agent/config/this_host.h"
#include "base/random_id.h"

namespace muster {
namespace {

RendezvousPlan PlanRendezvous(const Config& c) {
  RendezvousPlan plan;
  plan.opens_store = c.store == StoreOwner::kAgent && !NeverServesStore(c);
  // No endpoint left: in-process (as FinishBackend decides, agent/config/rendezvous_flags.h).
  if (c.rdzv_host_name.empty() || c.rdzv_backend == rdzv::Backend::kInProcess) return plan;
  plan.endpoint = {.host = c.rdzv_host_name, .port = c.rdzv_port};
  plan.backend = c.rdzv_backend;
  if (plan.backend == rdzv::Backend::kEtcd) {  // the endpoint is etcd's: never served here
    plan.etcd_members = c.rdzv_endpoints;
    return plan;
  }
  // gethostname and getifaddrs, once, and only where the answer decides something.
  if (c.rdzv_hosting != RdzvHosting::kAlways) {
    plan.endpoint_is_this_host = IsThisHost(plan.endpoint.host);
  }
  plan.hosts_here = c.rdzv_hosting == RdzvHosting::kAlways ||
                    (c.rdzv_hosting == RdzvHosting::kAuto && plan.endpoint_is_this_host);
  return plan;
}

OutputPlan PlanOutput(const Config& c, int nproc) {
  OutputPlan plan;
  for (const StreamSelection* sel : {&c.redirects, &c.tee}) {
    for (const auto& [rank, mask] : sel->by_rank) plan.stream_files |= mask != 0;
  }
  for (int local = 0; local < nproc; ++local) {
    const int redirect = c.redirects.For(local), tee = c.tee.For(local);
    const bool filtered = !c.local_ranks_filter.empty() && !c.local_ranks_filter.count(local);
    OutputPlan::Rank& rank = plan.ranks.emplace_back();
    for (int bit : {1, 2}) {
      StreamRoute& s = bit == 1 ? rank.out : rank.err;
      s.to_file = !c.log_dir.empty() || ((redirect | tee) & bit);
      s.to_console = !filtered && (!(redirect & bit) || (tee & bit));
    }
  }
  return plan;
}

}  // namespace

RunPlan ResolveRunPlan(Config config, WorkerPlan workers, nlohmann::json probe_report) {
  RunPlan plan;
  plan.workers = std::move(workers);
  plan.probe_report = std::move(probe_report);
  plan.run_id = config.standalone && config.run_id == "none" ? Uuid4() : config.run_id;
  plan.rendezvous = PlanRendezvous(config);
  plan.output = PlanOutput(config, plan.workers.nproc);
  plan.config = std::move(config);
  return plan;
}

}  // namespace muster
