// LeaseKeeper: keeps an agent's etcd lease alive and fences the agent
// (docs/operations/liveness-and-partitions.md "etcd backend: the lease and the fence"). A
// keep-alive goes every third of the TTL (every 200 ms after a failure); each answer moves the
// fence deadline to when etcd could let the lease expire at the earliest (the keep-alive's send
// time + the TTL it reports) less StopMargin. Past that deadline without an answer the agent is
// out: `lost` is called once, with the lease's earliest expiry as the error's kill-by time
// (rendezvous/rendezvous_error.h): the agent SIGTERMs its workers at once and SIGKILLs what is left
// at that time, before etcd drops its key and the others form a round without it (no two rounds at
// once).
//
// The deadline has a thread of its own: a caller busy in a slow etcd call (a coordinator
// renewing the job's lease through a member that does not answer, up to the call timeout)
// must not fence late. `lost` runs on either of the keeper's threads.
#ifndef MUSTER_RENDEZVOUS_ETCD_LEASE_KEEPER_H_
#define MUSTER_RENDEZVOUS_ETCD_LEASE_KEEPER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/rendezvous_error.h"

namespace muster::rdzv::etcd {

class LeaseKeeper {
 public:
  using LostFn = std::function<void(const RendezvousError&)>;

  // How long before etcd may drop the lease the agent gives up: the workers' time to stop
  // on SIGTERM before the SIGKILL at the lease's end. A larger margin would give them more
  // but ride through less of an etcd outage (docs/operations/liveness-and-partitions.md "etcd
  // backend: the lease and the fence").
  static absl::Duration StopMargin(absl::Duration ttl) {
    return std::min(ttl / 10, absl::Milliseconds(500));
  }

  // Keeps `lease` (granted with `ttl` at or after `granted`) alive through `etcd`, which must
  // outlive the keeper.
  LeaseKeeper(EtcdClient* etcd, int64_t lease, absl::Duration ttl, absl::Time granted, LostFn lost);
  // Stops both threads (at most one keep-alive call later).
  ~LeaseKeeper();

  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // True once `lost` was called: etcd drops (or dropped) the lease, revoking it is moot.
  bool lost() const { return lost_.load(); }

 private:
  void RunKeepAlive();
  void RunFence();
  // Waits up to `d` unless the keeper stops; false when it stops.
  bool Pause(absl::Duration d);
  // Calls `lost` once with `why` and `kill_by`.
  void Lose(absl::Status why, absl::Time kill_by);

  EtcdClient* const etcd_;
  const int64_t lease_;
  const absl::Duration ttl_;
  const LostFn on_lost_;
  std::atomic<bool> lost_{false};

  Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  std::thread keep_alive_;
  std::thread fence_;
};

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_LEASE_KEEPER_H_
