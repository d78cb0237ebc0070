// The etcd backend's coordinator election (README "etcd backend"): the agent whose node
// key is the oldest (lowest create revision) coordinates. etcd sorts a range by create
// revision only after reading all of it, so finding the oldest key costs O(nodes) in etcd;
// read by every joining agent, O(nodes^2) a job. So the coordinator also names itself
// under PREFIX/RUN_ID/coordinator (with its own lease), and an agent reads that one key
// first. It is exact, not a hint: keys made later are younger, and the key goes with the
// coordinator's lease, so while it exists its agent still has the oldest node key.
#ifndef MUSTER_RENDEZVOUS_ETCD_ELECTION_H_
#define MUSTER_RENDEZVOUS_ETCD_ELECTION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/etcd/etcd_client.h"

namespace muster::rdzv::etcd {

struct Elected {
  std::string node_id;   // "" when the job has no node key
  int64_t revision = 0;  // the store's revision it was read at
};

// The coordinator of the job under `job_prefix` ("PREFIX/RUN_ID/").
absl::StatusOr<Elected> FindCoordinator(EtcdClient& etcd, const std::string& job_prefix);

// Names `self` the coordinator (its key with `lease`), retried up to `give_up`.
absl::Status NameCoordinator(EtcdClient& etcd, const std::string& job_prefix,
                             const std::string& self, int64_t lease, absl::Duration give_up);

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_ELECTION_H_
