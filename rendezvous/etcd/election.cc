#include "rendezvous/etcd/election.h"

#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {

absl::StatusOr<Elected> FindCoordinator(EtcdClient& etcd, const std::string& job_prefix) {
  absl::StatusOr<RangeResult> named = etcd.Get(job_prefix + "coordinator");
  if (!named.ok()) return named.status();
  if (!named->kvs.empty() && !named->kvs[0].value.empty()) {
    return Elected{.node_id = named->kvs[0].value, .revision = named->revision};
  }
  // None named: the first agents of a job, or the coordinator just went and this agent
  // knows no successor that is still there.
  spdlog::debug("etcd rendezvous: no coordinator named: reading the oldest node key");
  absl::StatusOr<RangeResult> oldest = etcd.OldestAt(job_prefix + "nodes/");
  if (!oldest.ok()) return oldest.status();
  Elected elected{.revision = oldest->revision};
  if (!oldest->kvs.empty()) {
    const std::string& key = oldest->kvs[0].key;
    elected.node_id = key.substr(key.rfind('/') + 1);
  }
  return elected;
}

absl::StatusOr<Elected> FindNextCoordinator(EtcdClient& etcd, const std::string& job_prefix,
                                            const Successor& successor, const std::string& lost) {
  if (successor.node_id.empty() || successor.node_id == lost) {
    return FindCoordinator(etcd, job_prefix);
  }
  absl::StatusOr<RangeResult> key = etcd.Get(job_prefix + "nodes/" + successor.node_id);
  if (!key.ok()) return key.status();
  if (key->kvs.empty() || key->kvs[0].create_revision != successor.create_revision) {
    return FindCoordinator(etcd, job_prefix);
  }
  return Elected{.node_id = successor.node_id, .revision = key->revision, .node_key = key->kvs[0]};
}

absl::Status NameCoordinator(EtcdClient& etcd, const std::string& job_prefix,
                             const std::string& self, int64_t lease, absl::Duration give_up) {
  return PutWithin(etcd, job_prefix + "coordinator", self, lease, give_up).status();
}

}  // namespace muster::rdzv::etcd
