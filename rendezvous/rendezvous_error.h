// RendezvousError: why the rendezvous cannot go on, as a RendezvousClient reports it
// (RendezvousClient::ErrorSink), with the kill-by time as a field of its own.
//
// The kill-by time (docs/operations/liveness-and-partitions.md "etcd backend: the lease and
// the fence") is the moment the other nodes may go on without this one (the etcd backend: the earliest moment etcd may drop this agent's
// lease and key). An error that carries it obliges the agent to have killed its workers by
// then, whatever --shutdown-timeout says, or they would overlap the survivors' next round
// on the same ranks.
#ifndef MUSTER_RENDEZVOUS_RENDEZVOUS_ERROR_H_
#define MUSTER_RENDEZVOUS_RENDEZVOUS_ERROR_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace muster::rdzv {

struct RendezvousError {
  // InvalidArgument/FailedPrecondition/Unauthenticated/PermissionDenied: permanent (the
  // agent exits 2); Unavailable/DeadlineExceeded: transient (exit 138).
  absl::Status status;
  // Wall time; unset when the other nodes wait for this one's workers to stop as usual.
  std::optional<absl::Time> kill_by;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_RENDEZVOUS_ERROR_H_
