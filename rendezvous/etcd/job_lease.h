// JobLease: the etcd lease of a job's own keys (PREFIX/RUN_ID/job and .../status;
// docs/guides/etcd.md "Keys and leases"). Its TTL is kJobLeaseFactor x the agents' lease TTL.
// Whichever agent coordinates keeps it alive (etcd lets any client keep any lease alive) and stores
// its id in the job's state, so that the next coordinator continues the same lease; a coordinator
// change (about one agent TTL) fits well inside it. When every agent of the job is gone,
// finished or killed, nobody keeps it alive and the job's last keys expire with it: a
// finished job's status stays readable (`muster status`) until then.
//
// Owned by the Coordinator; not thread-safe (the coordinator's thread calls it).
#ifndef MUSTER_RENDEZVOUS_ETCD_JOB_LEASE_H_
#define MUSTER_RENDEZVOUS_ETCD_JOB_LEASE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/etcd/etcd_client.h"

namespace muster::rdzv::etcd {

// The job lease's TTL in agent lease TTLs: one for the old coordinator's lease to end,
// margin for the next one's first keep-alive.
inline constexpr int kJobLeaseFactor = 3;

class JobLease {
 public:
  JobLease(EtcdClient* etcd, absl::Duration agent_ttl) : etcd_(etcd), agent_ttl_(agent_ttl) {}

  // Continues `previous` (0: none) while etcd still has it, else grants a new lease.
  absl::Status Acquire(int64_t previous, absl::Time now);
  // The lease id (0 before Acquire succeeded).
  int64_t id() const { return id_; }
  // When KeepAlive is due next.
  absl::Time due() const { return due_; }
  // Keeps the lease alive once it is due. Returns true when it had expired (etcd dropped
  // it: this coordinator took over too late, or etcd lost it) and a new one was granted:
  // the caller puts its keys again under the new id. A failed call is retried soon.
  absl::StatusOr<bool> KeepAlive(absl::Time now);

  absl::Duration ttl() const { return agent_ttl_ * kJobLeaseFactor; }

 private:
  absl::Status Grant(absl::Time now);

  EtcdClient* etcd_;
  const absl::Duration agent_ttl_;
  int64_t id_ = 0;
  absl::Time due_ = absl::InfiniteFuture();
};

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_JOB_LEASE_H_
