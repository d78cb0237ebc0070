#include "rendezvous/etcd/node_key.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {

std::string NodeIdOfKey(absl::string_view key) {
  return std::string(key.substr(key.rfind('/') + 1));
}

absl::StatusOr<v1::EtcdNode> ParseNodeKey(const KeyValue& kv) {
  if (kv.lease == 0) return absl::InvalidArgumentError("it has no lease (no agent put it)");
  v1::EtcdNode node;
  if (!node.ParseFromString(kv.value)) {
    return absl::InvalidArgumentError("its value is not a muster node record");
  }
  if (node.join().node().node_id() != NodeIdOfKey(kv.key)) {
    return absl::InvalidArgumentError(absl::StrCat("its value names node '",
                                                   node.join().node().node_id(), "', not '",
                                                   NodeIdOfKey(kv.key), "'"));
  }
  return node;
}

void GarbageLog::Ignore(const KeyValue& kv, absl::string_view why) {
  {
    MutexLock lock(&mu_);
    if (!named_.emplace(kv.key, kv.create_revision).second) return;
  }
  spdlog::warn(
      "etcd rendezvous: ignoring the key {} (create revision {}): {}; if no agent of this "
      "job put it, delete it (etcdctl del {})",
      kv.key, kv.create_revision, std::string(why), kv.key);
}

}  // namespace muster::rdzv::etcd
