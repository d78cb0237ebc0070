// DrainNode: one muster.v1.Drain.Preempt call (for `muster drain`, docs/guides/preemption.md).
// Blocks the calling thread; gRPC types stay behind this header.
#ifndef MUSTER_RENDEZVOUS_GRPC_DRAIN_CLIENT_H_
#define MUSTER_RENDEZVOUS_GRPC_DRAIN_CLIENT_H_

#include <string>

#include "absl/status/statusor.h"
#include "rendezvous/core/types.h"
#include "rendezvous/grpc/job_status_client.h"

namespace muster::rdzv {

// Preempts the node of query.run_id named `node_id`, or else the one on `host`; returns it
// (node_id and host set). Errors as GetJobStatus, plus the server's NotFound (no such job or
// node), InvalidArgument (several nodes on `host`) and FailedPrecondition (between rounds).
absl::StatusOr<NodeInfo> DrainNode(const JobStatusQuery& query, const std::string& node_id,
                                   const std::string& host, const std::string& reason);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_GRPC_DRAIN_CLIENT_H_
