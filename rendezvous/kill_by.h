// The kill-by time of a rendezvous error (docs/operations/liveness-and-partitions.md "etcd backend:
// the lease and the fence"): the moment the other nodes may go on without this one (the etcd
// backend: the earliest moment etcd may drop this agent's lease and key). An error that carries it
// obliges the agent to have killed its workers by then, whatever --shutdown-timeout says, or they
// would overlap the survivors' next round on the same ranks. Travels as a payload of the
// absl::Status, so that the ErrorSink keeps its one argument.
#ifndef MUSTER_RENDEZVOUS_KILL_BY_H_
#define MUSTER_RENDEZVOUS_KILL_BY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/time/time.h"

namespace muster::rdzv {

inline constexpr char kKillByPayload[] = "type.muster.dev/kill_by_unix_ns";

// Marks `error` with `kill_by` (wall time).
inline void SetKillBy(absl::Status* error, absl::Time kill_by) {
  error->SetPayload(kKillByPayload, absl::Cord(std::to_string(absl::ToUnixNanos(kill_by))));
}

// `error` marked with `kill_by`.
inline absl::Status WithKillBy(absl::Status error, absl::Time kill_by) {
  SetKillBy(&error, kill_by);
  return error;
}

// The kill-by time `error` carries, if any.
inline std::optional<absl::Time> KillByOf(const absl::Status& error) {
  auto payload = error.GetPayload(kKillByPayload);  // absl::optional in Debian's abseil
  int64_t ns = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &ns)) return std::nullopt;
  return absl::FromUnixNanos(ns);
}

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_KILL_BY_H_
