// JobRegistry (job_registry.h): preemption notices (docs/guides/preemption.md), from the node
// itself (its agent got SIGTERM or a spot notice) or from `muster drain`.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "rendezvous/registry/job_registry.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv {

void JobRegistry::Preempt(const std::string& node_id, const std::string& reason) {
  WithNodeJob(node_id, [&](Job& job, absl::Time now, std::vector<Event>* out) {
    absl::Status st = job.Preempt(node_id, reason, now, out);
    if (st.ok()) {
      spdlog::info("rendezvous: node {} of job {} is being preempted: {}", node_id,
                   job.spec().run_id, reason);
    } else {
      spdlog::info("rendezvous: preemption notice of node {} not passed on: {}", node_id,
                   std::string(st.message()));
    }
  });
}

absl::StatusOr<NodeInfo> JobRegistry::Drain(const std::string& run_id, const std::string& node_id,
                                            const std::string& host, const std::string& reason) {
  Streams touched;
  NodeInfo drained;
  {
    MutexLock lock(&mu_);
    auto entry = jobs_.find(run_id);
    if (entry == jobs_.end()) {
      return absl::NotFoundError(absl::StrCat("no job ", run_id, " on this server"));
    }
    Job& job = entry->second.job;
    ASSIGN_OR_RETURN(drained, job.NodeToDrain(node_id, host));
    std::vector<Event> events;
    if (absl::Status st = job.Preempt(drained.node_id, reason, absl::Now(), &events); !st.ok()) {
      return st;
    }
    entry->second.version = ++versions_;
    RouteLocked(events, &touched);
  }
  spdlog::info("rendezvous: draining node {} ({}) of job {}: {}", drained.node_id, drained.host,
               run_id, reason);
  FlushAll(touched);
  NotifyWatchers();
  return drained;
}

}  // namespace muster::rdzv
