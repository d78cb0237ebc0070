#include "rendezvous/etcd/election.h"

namespace muster::rdzv::etcd {

absl::StatusOr<Elected> FindCoordinator(EtcdClient& etcd, const std::string& job_prefix) {
  absl::StatusOr<RangeResult> named = etcd.Get(job_prefix + "coordinator");
  if (!named.ok()) return named.status();
  if (!named->kvs.empty() && !named->kvs[0].value.empty()) {
    return Elected{.node_id = named->kvs[0].value, .revision = named->revision};
  }
  // None named: the first agents of a job, or the coordinator just went.
  absl::StatusOr<RangeResult> oldest = etcd.OldestAt(job_prefix + "nodes/");
  if (!oldest.ok()) return oldest.status();
  Elected elected{.revision = oldest->revision};
  if (!oldest->kvs.empty()) {
    const std::string& key = oldest->kvs[0].key;
    elected.node_id = key.substr(key.rfind('/') + 1);
  }
  return elected;
}

absl::Status NameCoordinator(EtcdClient& etcd, const std::string& job_prefix,
                             const std::string& self, int64_t lease, absl::Duration give_up) {
  return PutWithin(etcd, job_prefix + "coordinator", self, lease, give_up).status();
}

}  // namespace muster::rdzv::etcd
