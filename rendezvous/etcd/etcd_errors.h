// The etcd client's own helper (not a public header): etcd's auth and TLS refusals as
// statuses that say what to fix (rendezvous/etcd/etcd_security.cc).
#ifndef MUSTER_RENDEZVOUS_ETCD_ETCD_ERRORS_H_
#define MUSTER_RENDEZVOUS_ETCD_ETCD_ERRORS_H_

#include "absl/status/status.h"

namespace muster::rdzv::etcd {

// `status` with a hint when it is a TLS refusal (then FailedPrecondition, not Unavailable),
// a missing or wrong user or password (Unauthenticated) or a missing permission; else as is.
absl::Status ExplainEtcdError(const absl::Status& status);

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_ETCD_ERRORS_H_
