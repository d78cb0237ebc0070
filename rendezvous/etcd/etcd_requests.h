// `muster drain` and job-wide `muster stacks` with --rdzv-backend etcd (docs/guides/preemption.md,
// docs/guides/hangs-and-stacks.md "Stacks"). No server relays them: the command puts a request key
// (PREFIX/RUN_ID/requests/ID, proto/muster/v1/etcd.proto) with a lease of its own; the
// job's coordinator (a drain) or every agent (stacks) sees it through the watch it keeps
// anyway and answers under answers/ID/NODE_ID with the same lease. The command waits for
// the answers through a watch of its own, bounded by its timeout, then revokes the lease:
// nothing of the request outlives it. Plain functions; blocking; thread-safe.
#ifndef MUSTER_RENDEZVOUS_ETCD_ETCD_REQUESTS_H_
#define MUSTER_RENDEZVOUS_ETCD_ETCD_REQUESTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/core/stacks.h"
#include "rendezvous/core/types.h"
#include "rendezvous/etcd/etcd_status.h"

namespace muster::rdzv::etcd {

// Preempts the node of query.run_id named `node_id`, or else the one on `host`; returns it.
// NotFound (no such job, or no such node), InvalidArgument (several nodes on `host`),
// FailedPrecondition (no round runs) are the coordinator's refusals; Unavailable when etcd
// does not answer, DeadlineExceeded when no coordinator answered within query.timeout.
absl::StatusOr<NodeInfo> DrainThroughEtcd(const EtcdStatusQuery& query, const std::string& node_id,
                                          const std::string& host, const std::string& reason);

// Every node's stacks (by group rank where the job's status knows it); a node that did not
// answer within `collect` + 1 s is listed with `unavailable` set. NotFound when the job has
// no node in etcd; Unavailable when etcd does not answer.
absl::StatusOr<std::vector<NodeStacks>> StacksThroughEtcd(const EtcdStatusQuery& query,
                                                          absl::Duration collect);

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_ETCD_REQUESTS_H_
