// Liveness: sees an agent PROCESS die at once with the etcd backend
// (docs/operations/liveness-and-partitions.md "etcd backend: a dead agent is seen at once"). etcd
// leases see a dead agent only when its TTL ends; its workers die with it at once, and the peers'
// collectives raise (exit 1) long before, so the coordinator would judge a failure where there is a
// lost node.
//
// Every agent listens on a TCP port of its own address (ephemeral, published in its node
// key) and holds one connection to the coordinator's: the coordinator accepts one per
// node (one reactor, base/event_loop.h, on a thread of its own; no thread per node). When
// a process dies its kernel closes its sockets, before its workers are even signalled: the
// far end reads EOF. So
//   - EOF without a bye before it = the process on the other end died;
//   - a bye ('B') first = it closed on purpose (it left, or follows another coordinator);
//   - silence (host down, partition), a reset or a failed connect = nothing: the lease
//     decides, as before.
// Each connection starts with the connecting agent's "muster-liveness NODE_ID LEASE_HEX\n";
// its end is reported as (node id, lease id), which the caller checks against the node's
// key in etcd before acting: a stranger who closes a connection makes it act only on a
// node id and lease that match (knowing them already means reading the job's keys).
//
// Owned by the agent's etcd client. Thread-safe; `on_ended` runs on the liveness thread.
#ifndef MUSTER_RENDEZVOUS_ETCD_LIVENESS_H_
#define MUSTER_RENDEZVOUS_ETCD_LIVENESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace muster::rdzv::etcd {

class Liveness {
 public:
  // A trusted connection's far end died: the node it named (incoming), or the coordinator
  // this agent follows (outgoing).
  using EndedFn = std::function<void(const std::string& node_id, int64_t lease)>;

  // Listens on `host` (the agent's checked address), port 0; `self_id` and `self_lease`
  // are what this agent's connections say first.
  static absl::StatusOr<std::unique_ptr<Liveness>> Start(const std::string& host,
                                                         const std::string& self_id,
                                                         int64_t self_lease, EndedFn on_ended);
  // Says bye on every connection, then closes them.
  ~Liveness();

  // "ADDR:PORT" ("[v6]:PORT"): the numeric address it listens on, for the node key.
  const std::string& address() const;

  // Holds one connection to coordinator `node_id` (lease `lease`) at `address`; the one
  // held before, if any, is closed with a bye. An empty `address` only closes it.
  void Follow(const std::string& node_id, int64_t lease, const std::string& address);
  // Closes (with a bye) the connections from `node_id`: its key is gone.
  void Forget(const std::string& node_id);

  class Impl;

 private:
  explicit Liveness(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_LIVENESS_H_
