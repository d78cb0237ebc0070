// JobRegistry (job_registry.h): preemption notices (docs/guides/preemption.md), from the node
// itself (its agent got SIGTERM or a spot notice) or from `muster drain`.
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "rendezvous/registry/job_registry.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv {

void JobRegistry::Preempt(const std::string& node_id, const std::string& reason) {
  WithNodeJob(node_id, [&](JobHost& host, absl::Time now) { host.Preempt(node_id, reason, now); });
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
    ASSIGN_OR_RETURN(drained, entry->second.host.Drain(node_id, host, reason, absl::Now()));
    touched = std::exchange(touched_, {});
  }
  FlushAll(touched);
  NotifyWatchers();
  return drained;
}

}  // namespace muster::rdzv
