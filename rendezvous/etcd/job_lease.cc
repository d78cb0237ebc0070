#include "rendezvous/etcd/job_lease.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {

absl::Status JobLease::Acquire(int64_t previous, absl::Time now) {
  if (previous != 0) {
    absl::StatusOr<absl::Duration> left = etcd_->KeepAliveOnce(previous);
    if (left.ok()) {
      id_ = previous;
      due_ = now + agent_ttl_;
      return absl::OkStatus();
    }
    // NotFound: the job's lease ran out before this coordinator came; any other error:
    // etcd is out of reach, and a new grant below says so.
    spdlog::info("etcd rendezvous: the job's lease {:x} is gone ({}): granting a new one", previous,
                 std::string(left.status().message()));
  }
  return Grant(now);
}

absl::Status JobLease::Grant(absl::Time now) {
  absl::StatusOr<int64_t> granted = etcd_->GrantLease(ttl());
  if (!granted.ok()) {
    return absl::UnavailableError(
        absl::StrCat("granting the job's lease: ", granted.status().message()));
  }
  id_ = *granted;
  due_ = now + agent_ttl_;
  return absl::OkStatus();
}

absl::StatusOr<bool> JobLease::KeepAlive(absl::Time now) {
  if (now < due_) return false;
  absl::StatusOr<absl::Duration> left = etcd_->KeepAliveOnce(id_);
  if (left.ok()) {
    due_ = now + agent_ttl_;
    return false;
  }
  if (!absl::IsNotFound(left.status())) {
    // etcd re-electing its leader, a member down: again soon, well inside the TTL.
    due_ = now + std::min(agent_ttl_ / 3, absl::Milliseconds(200));
    return left.status();
  }
  spdlog::warn("etcd rendezvous: the job's lease {:x} expired; granting a new one", id_);
  absl::Status granted = Grant(now);
  if (!granted.ok()) {
    due_ = now + std::min(agent_ttl_ / 3, absl::Milliseconds(200));
    return granted;
  }
  return true;
}

}  // namespace muster::rdzv::etcd
