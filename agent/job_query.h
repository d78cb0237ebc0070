// JobQueryFromFlags: the connection to a rendezvous server from the flags that `muster
// status` and `muster stacks` share (--rdzv-endpoint, --rdzv-id, --token-file, --tls-ca,
// --timeout). Plain functions; thread-safe.
#ifndef MUSTER_AGENT_JOB_QUERY_H_
#define MUSTER_AGENT_JOB_QUERY_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/flag_table.h"
#include "rendezvous/grpc/job_status_client.h"

namespace muster {

// InvalidArgument naming the flag and the fix (a usage error).
absl::StatusOr<rdzv::JobStatusQuery> JobQueryFromFlags(const FlagValues& values);

// A duration flag that must be positive and finite (a bare number is seconds).
absl::StatusOr<absl::Duration> PositiveDuration(const FlagValue& value);

}  // namespace muster

#endif  // MUSTER_AGENT_JOB_QUERY_H_
