// `muster status --rdzv-backend etcd`: the query from status's flags (--rdzv-endpoint
// lists etcd's members, --rdzv-id names the job, --rdzv-conf etcd_prefix=/path, --timeout
// bounds each member's answer). Plain functions; thread-safe.
#ifndef MUSTER_AGENT_ETCD_STATUS_QUERY_H_
#define MUSTER_AGENT_ETCD_STATUS_QUERY_H_

#include "absl/status/statusor.h"
#include "agent/config/flag_table.h"
#include "rendezvous/etcd/etcd_status.h"

namespace muster {

// Whether --rdzv-backend names etcd (etcd, etcd-v2); InvalidArgument naming the flag for
// a backend that `muster status` does not know.
absl::StatusOr<bool> StatusFromEtcd(const FlagValues& values);

// InvalidArgument naming the flag and the fix (a usage error).
absl::StatusOr<rdzv::etcd::EtcdStatusQuery> EtcdStatusQueryFromFlags(const FlagValues& values);

}  // namespace muster

#endif  // MUSTER_AGENT_ETCD_STATUS_QUERY_H_
