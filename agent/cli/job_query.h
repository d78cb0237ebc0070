// The flags that `muster status`, `muster stacks` and `muster drain` share to reach a job
// through its backend (kJobQueryFlags; each backend reads them with --rdzv-endpoint and
// --rdzv-id: agent/cli/backends/rendezvous_backend.h). Plain functions; thread-safe.
#ifndef MUSTER_AGENT_JOB_QUERY_H_
#define MUSTER_AGENT_JOB_QUERY_H_

#include <array>
#include <cstddef>
#include <iterator>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/config/flag_table.h"

namespace muster {

// The flags a backend's Query reads that mean the same in every command: how to reach the
// server and prove who we are. --rdzv-endpoint and --rdzv-id are each command's own (one
// requires them, another reads this host's agents without them). A command's table is
// WithJobQueryFlags(its own flags), so that a new connection or security flag reaches
// every command that talks to the server.
inline constexpr FlagSpec kJobQueryFlags[] = {
    {.name = "rdzv-backend",
     .group = "Connection",
     .default_text = "c10d",
     .help = "etcd (or etcd-v2): reach the job through etcd; --rdzv-endpoint lists etcd's "
             "members and --rdzv-id is required"},
    {.name = "rdzv-conf",
     .group = "Connection",
     .default_text = "",
     .help = "with etcd: etcd_prefix=/path (the agents' key prefix, default /muster) and the "
             "agents' TLS and user keys: protocol, cacert, cert, key, username, password_file"},
    {.name = "timeout",
     .group = "Connection",
     .default_text = "10s",
     .help = "wait up to this long for a server still starting (10, 10s, 500ms); without "
             "it a refused connection fails at once and an unanswered call after 10s"},
    {.name = "token-file",
     .group = "Security",
     .default_text = "MUSTER_TOKEN",
     .help = "file with the shared secret"},
    {.name = "tls-ca",
     .group = "Security",
     .default_text = "none",
     .help = "PEM CA of the server's certificate"},
};

// `own` followed by kJobQueryFlags, as one table.
template <size_t N>
constexpr std::array<FlagSpec, N + std::size(kJobQueryFlags)> WithJobQueryFlags(
    const FlagSpec (&own)[N]) {
  std::array<FlagSpec, N + std::size(kJobQueryFlags)> table{};
  size_t i = 0;
  for (const FlagSpec& f : own) table[i++] = f;
  for (const FlagSpec& f : kJobQueryFlags) table[i++] = f;
  return table;
}

// A duration flag that must be positive and finite (a bare number is seconds).
absl::StatusOr<absl::Duration> PositiveDuration(const FlagValue& value);

}  // namespace muster

#endif  // MUSTER_AGENT_JOB_QUERY_H_
