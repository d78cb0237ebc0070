#include "rendezvous/etcd/election.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {
namespace {

// The coordinator `named` names, when its node key is live on the same lease; else
// nullopt (`named` logged as garbage).
absl::StatusOr<std::optional<Elected>> FollowNamed(EtcdClient& etcd, const std::string& job_prefix,
                                                   const KeyValue& named, GarbageLog& garbage) {
  if (named.lease == 0) {
    garbage.Ignore(named, "it has no lease (no coordinator put it)");
    return std::nullopt;
  }
  absl::StatusOr<RangeResult> node = etcd.Get(job_prefix + "nodes/" + named.value);
  if (!node.ok()) return node.status();
  if (node->kvs.empty() || !ParseNodeKey(node->kvs[0]).ok() || node->kvs[0].lease != named.lease) {
    // Also a coordinator that just left (its key goes with its lease, a moment later).
    garbage.Ignore(named, absl::StrCat("it names node '", named.value,
                                       "', which has no node key on the same lease"));
    return std::nullopt;
  }
  return Elected{.node_id = named.value, .revision = node->revision, .node_key = node->kvs[0]};
}

// The oldest node key at `read` (the oldest key under nodes/, read already), skipping
// garbage: with any, one read of every node key at the same revision.
absl::StatusOr<Elected> OldestNodeKey(EtcdClient& etcd, const std::string& job_prefix,
                                      const RangeResult& read, GarbageLog& garbage) {
  Elected elected{.revision = read.revision};
  if (read.kvs.empty()) return elected;
  if (absl::Status valid = ParseNodeKey(read.kvs[0]).status(); valid.ok()) {
    elected.node_id = NodeIdOfKey(read.kvs[0].key);
    return elected;
  } else {
    garbage.Ignore(read.kvs[0], valid.message());
  }
  absl::StatusOr<RangeResult> all = etcd.RangePrefix(job_prefix + "nodes/", read.revision);
  if (!all.ok()) return all.status();
  const KeyValue* oldest = nullptr;
  for (const KeyValue& kv : all->kvs) {
    if (absl::Status valid = ParseNodeKey(kv).status(); !valid.ok()) {
      garbage.Ignore(kv, valid.message());
    } else if (oldest == nullptr || kv.create_revision < oldest->create_revision) {
      oldest = &kv;
    }
  }
  if (oldest != nullptr) elected.node_id = NodeIdOfKey(oldest->key);
  return elected;
}

}  // namespace

absl::StatusOr<Elected> FindCoordinator(EtcdClient& etcd, const std::string& job_prefix,
                                        GarbageLog& garbage) {
  absl::StatusOr<RangeResult> named = etcd.Get(job_prefix + "coordinator");
  if (!named.ok()) return named.status();
  if (!named->kvs.empty() && !named->kvs[0].value.empty()) {
    absl::StatusOr<std::optional<Elected>> followed =
        FollowNamed(etcd, job_prefix, named->kvs[0], garbage);
    if (!followed.ok()) return followed.status();
    if (*followed) return **followed;
  }
  // None named: the first agents of a job, or the coordinator just went and this agent
  // knows no successor that is still there.
  spdlog::debug("etcd rendezvous: no coordinator named: reading the oldest node key");
  absl::StatusOr<RangeResult> oldest = etcd.OldestAt(job_prefix + "nodes/");
  if (!oldest.ok()) return oldest.status();
  return OldestNodeKey(etcd, job_prefix, *oldest, garbage);
}

absl::StatusOr<Elected> FindNextCoordinator(EtcdClient& etcd, const std::string& job_prefix,
                                            const Successor& successor, const std::string& lost,
                                            GarbageLog& garbage) {
  if (successor.node_id.empty() || successor.node_id == lost) {
    return FindCoordinator(etcd, job_prefix, garbage);
  }
  absl::StatusOr<RangeResult> key = etcd.Get(job_prefix + "nodes/" + successor.node_id);
  if (!key.ok()) return key.status();
  if (key->kvs.empty() || key->kvs[0].create_revision != successor.create_revision ||
      !ParseNodeKey(key->kvs[0]).ok()) {
    return FindCoordinator(etcd, job_prefix, garbage);
  }
  return Elected{.node_id = successor.node_id, .revision = key->revision, .node_key = key->kvs[0]};
}

absl::Status NameCoordinator(EtcdClient& etcd, const std::string& job_prefix,
                             const std::string& self, int64_t lease, absl::Duration give_up) {
  return PutWithin(etcd, job_prefix + "coordinator", self, lease, give_up).status();
}

}  // namespace muster::rdzv::etcd
