// What a node's Join must satisfy before its job admits it (docs/design.md §4.3), as pure
// functions: the job's spec must be one a job can run and the same on every node, and the
// node's own values must fit it. Job::Join calls them; conflicts between rank hints need
// the job's members and are checked there. Every error is InvalidArgument naming the node
// and the flag to fix.
#ifndef MUSTER_RENDEZVOUS_CORE_JOIN_CHECKS_H_
#define MUSTER_RENDEZVOUS_CORE_JOIN_CHECKS_H_

#include <string>

#include "absl/status/status.h"
#include "rendezvous/core/types.h"

namespace muster::rdzv {

// Workers one node may bring. The server keeps a record per worker and sums ranks in int,
// so a bogus Join (local_world_size 2^31-1) must be refused, not allocated (found by
// tests/fuzz/rendezvous_fuzz).
inline constexpr int kMaxLocalWorldSize = 4096;

// "host (address, node id)": how messages name a node.
std::string DescribeNode(const NodeInfo& node);

// A spec some job can run: the first joiner's becomes the job's, and a wire message can
// carry anything (a job of at most 0 nodes would "run" a round of none forever; found by
// tests/fuzz/rendezvous_fuzz).
absl::Status CheckJobSpec(const JobSpec& spec, const NodeInfo& who);

// `node`'s spec equals the job's in every field all nodes must share (run id, nnodes,
// max restarts, restart policy); the error names the flag that differs.
absl::Status CheckSameJobSpec(const JobSpec& job, const JobSpec& node, const NodeInfo& who);

// The node brings 1..kMaxLocalWorldSize workers and a rank hint below the job's max_nodes.
absl::Status CheckNodeFits(const NodeInfo& node, const JobSpec& job);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_JOIN_CHECKS_H_
