// The etcd backend's coordinator election (docs/guides/etcd.md): the agent whose node
// key is the oldest (lowest create revision) coordinates. etcd sorts a range by create
// revision only after reading all of it, so finding the oldest key costs O(nodes) in etcd;
// read by every joining agent, O(nodes^2) a job. So the coordinator also names itself
// under PREFIX/RUN_ID/coordinator (with its own lease), and an agent reads that one key
// first. It is exact, not a hint: keys made later are younger, and the key goes with the
// coordinator's lease, so while it exists its agent still has the oldest node key.
//
// When the coordinator goes, that key goes with it, and every survivor would read the
// oldest key: O(nodes^2) in etcd a fail-over. So the coordinator also names its successor
// in every batch it publishes (EtcdEvents.successor): the oldest node key it knows besides
// its own. A survivor follows the successor it last heard of after one read of that key
// (FindNextCoordinator). Why that read is exact: when S was named, the naming coordinator
// C had read every node key up to some revision W (its watch delivers them in order), so
// every key alive then but C's is at least as young as S's, and every key made later is
// younger still. A key keeps its create revision while it lives, so while S's key exists
// with the revision named, only C's key can be older than it; and C no longer has a key
// once a coordinator's deletion is seen (C is the lost coordinator, or an earlier one
// whose key went before: a coordinator's key is the oldest while it lives). So S is the
// oldest key alive. Otherwise the read falls back to FindCoordinator: S's key is absent
// or made anew (S left, e.g. as a waiting node, with no batch sent since to name another),
// the agent heard of no successor (it joined after the last batch), or the successor is
// the lost coordinator itself (it died before its first batch).
//
// Every key read is checked (node_key.h): the coordinator key counts only when it is on a
// lease and names a node key on the same lease, and a node key only when it is one; a key
// that is not is garbage, logged once in `garbage` and passed over.
#ifndef MUSTER_RENDEZVOUS_ETCD_ELECTION_H_
#define MUSTER_RENDEZVOUS_ETCD_ELECTION_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/etcd/node_key.h"

namespace muster::rdzv::etcd {

struct Elected {
  std::string node_id;   // "" when the job has no node key
  int64_t revision = 0;  // the store's revision it was read at
  // The coordinator's node key, when the search read it (FindNextCoordinator).
  std::optional<KeyValue> node_key;
};

// A coordinator's successor as its batches name it (EtcdEvents.successor).
struct Successor {
  std::string node_id;  // "" when none was named
  int64_t create_revision = 0;
};

// The coordinator of the job under `job_prefix` ("PREFIX/RUN_ID/").
absl::StatusOr<Elected> FindCoordinator(EtcdClient& etcd, const std::string& job_prefix,
                                        GarbageLog& garbage);

// The coordinator after `lost`'s key was deleted: `successor` after one read of its key,
// if that key still has the create revision named; else FindCoordinator.
absl::StatusOr<Elected> FindNextCoordinator(EtcdClient& etcd, const std::string& job_prefix,
                                            const Successor& successor, const std::string& lost,
                                            GarbageLog& garbage);

// Names `self` the coordinator (its key with `lease`), retried up to `give_up`.
absl::Status NameCoordinator(EtcdClient& etcd, const std::string& job_prefix,
                             const std::string& self, int64_t lease, absl::Duration give_up);

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_ELECTION_H_
