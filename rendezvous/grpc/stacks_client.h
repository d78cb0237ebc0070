// GetStacks: one muster.v1.Stacks.Get call (for `muster stacks`, docs/guides/hangs-and-stacks.md
// "Stacks"). Blocks the calling thread; gRPC types stay behind this header.
#ifndef MUSTER_RENDEZVOUS_GRPC_STACKS_CLIENT_H_
#define MUSTER_RENDEZVOUS_GRPC_STACKS_CLIENT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/core/stacks.h"
#include "rendezvous/grpc/job_status_client.h"

namespace muster::rdzv {

// Every live node's worker stacks, by group rank, gathered within `collect` (nodes that did
// not answer by then are marked unavailable). The server is reached within query.timeout.
// Errors as GetJobStatus.
absl::StatusOr<std::vector<NodeStacks>> GetStacks(const JobStatusQuery& query,
                                                  absl::Duration collect);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_GRPC_STACKS_CLIENT_H_
