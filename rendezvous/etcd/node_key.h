// A node key as the etcd backend reads it (docs/guides/etcd.md "Keys and leases"):
// PREFIX/RUN_ID/nodes/ID holding an EtcdNode whose join names ID, on a lease (an agent's keys all
// go with its lease). Anything else there (a key put by hand or by a tool, without a lease, or not
// an EtcdNode) is garbage: taken for a node, a key without a lease would be the oldest forever and
// coordinate a job that no agent runs. Readers skip garbage and name each key once in the log
// (GarbageLog).
#ifndef MUSTER_RENDEZVOUS_ETCD_NODE_KEY_H_
#define MUSTER_RENDEZVOUS_ETCD_NODE_KEY_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"
#include "muster/v1/etcd.pb.h"
#include "rendezvous/etcd/etcd_client.h"

namespace muster::rdzv::etcd {

// The node id of a key under nodes/ (the part after the last '/').
std::string NodeIdOfKey(absl::string_view key);

// `kv`'s EtcdNode, or InvalidArgument saying why it is no node key.
absl::StatusOr<v1::EtcdNode> ParseNodeKey(const KeyValue& kv);

// Logs each ignored key once (per key and create revision) at warning level. Thread-safe.
class GarbageLog {
 public:
  void Ignore(const KeyValue& kv, absl::string_view why);

 private:
  Mutex mu_;
  std::set<std::pair<std::string, int64_t>> named_ ABSL_GUARDED_BY(mu_);
};

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_NODE_KEY_H_
