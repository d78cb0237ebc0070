#include "rendezvous/etcd/coordinator_inbox.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "muster/v1/etcd.pb.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {

CoordinatorInbox::CoordinatorInbox(EtcdClient* etcd, std::string job_prefix, std::string self_id,
                                   int64_t lease, const JobSpec& spec, GarbageLog* garbage)
    : etcd_(etcd),
      garbage_(garbage),
      prefix_(std::move(job_prefix)),
      self_(std::move(self_id)),
      coordinator_(std::make_unique<Coordinator>(etcd, prefix_, self_, lease, spec)) {}

CoordinatorInbox::~CoordinatorInbox() = default;

absl::Status CoordinatorInbox::Begin(int64_t since, absl::Time now) {
  absl::StatusOr<RangeResult> all = etcd_->RangePrefix(prefix_ + "nodes/");
  if (!all.ok()) return all.status();
  std::map<std::string, v1::Join> joins;
  for (const KeyValue& kv : all->kvs) {
    absl::StatusOr<v1::EtcdNode> parsed = ParseNodeKey(kv);
    if (!parsed.ok()) {
      garbage_->Ignore(kv, parsed.status().message());
      continue;
    }
    const v1::EtcdNode& value = *parsed;
    const std::string id = NodeIdOfKey(kv.key);
    nodes_[id] = NodeKey{
        .create_revision = kv.create_revision, .lease = kv.lease, .ready_for = value.ready_for()};
    by_age_.emplace(kv.create_revision, id);
    joins[id] = value.join();
  }
  nodes_read_at_ = all->revision;
  since_ = std::min(since, nodes_read_at_);
  std::vector<std::string> present;  // for preemptions carried over (carried_preemptions.h)
  for (const auto& [id, n] : nodes_) present.push_back(id);
  NameSuccessor();
  absl::Status begun = coordinator_->Begin(now, present);
  if (!begun.ok()) return begun;
  begun_ = true;
  std::vector<std::pair<int64_t, std::string>> ready;  // oldest first
  for (const auto& [id, n] : nodes_) {
    if (n.ready_for == self_) ready.emplace_back(n.create_revision, id);
  }
  std::sort(ready.begin(), ready.end());
  for (const auto& [revision, id] : ready) coordinator_->NodeReady(joins[id], now);
  return absl::OkStatus();
}

std::unique_ptr<EtcdWatch> CoordinatorInbox::Watch() const {
  // "in/" < "job" < "nodes/": the range holds the job key too (ignored).
  return etcd_->Watch(prefix_ + "in/", since_ + 1, {.range_end = PrefixEnd(prefix_ + "nodes/")});
}

std::optional<RendezvousError> CoordinatorInbox::Apply(const std::vector<WatchEvent>& events) {
  for (const WatchEvent& e : events) {
    absl::string_view rel = absl::string_view(e.kv.key).substr(prefix_.size());
    if (absl::StartsWith(rel, "nodes/")) {
      if (e.kv.mod_revision <= nodes_read_at_) continue;  // in Begin's range already
      if (!e.deleted) {
        ApplyNodeKey(e.kv);
        continue;
      }
      const std::string id = NodeIdOfKey(rel);
      auto gone = nodes_.find(id);
      if (gone == nodes_.end()) continue;
      by_age_.erase({gone->second.create_revision, id});
      nodes_.erase(gone);
      NameSuccessor();  // before NodeGone's batch names it
      if (id == self_) {
        return RendezvousError{
            .status = absl::UnavailableError("this agent's etcd lease ended: dropped from the job"),
            .kill_by = absl::Now()};
      }
      coordinator_->NodeGone(id, absl::Now());
    } else if (absl::StartsWith(rel, "in/") && !e.deleted) {
      v1::EtcdReport report;
      if (!report.ParseFromString(e.kv.value) || report.to() != self_) continue;
      // in/NODE_ID/SEQ
      absl::string_view from = rel.substr(3, rel.rfind('/') - 3);
      coordinator_->Report(std::string(from), report.message(), absl::Now());
    }
  }
  return std::nullopt;
}

int64_t CoordinatorInbox::LeaseOf(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? 0 : it->second.lease;
}

void CoordinatorInbox::ApplyNodeKey(const KeyValue& kv) {
  absl::StatusOr<v1::EtcdNode> parsed = ParseNodeKey(kv);
  if (!parsed.ok()) {
    garbage_->Ignore(kv, parsed.status().message());
    return;
  }
  const v1::EtcdNode& value = *parsed;
  const std::string id = NodeIdOfKey(kv.key);
  NodeKey& n = nodes_[id];
  if (n.create_revision != kv.create_revision) {
    by_age_.erase({n.create_revision, id});
    by_age_.emplace(kv.create_revision, id);
    n.create_revision = kv.create_revision;
    NameSuccessor();
  }
  n.lease = kv.lease;
  n.ready_for = value.ready_for();
  if (begun_ && n.ready_for == self_) coordinator_->NodeReady(value.join(), absl::Now());
}

void CoordinatorInbox::NameSuccessor() {
  for (const auto& [revision, id] : by_age_) {
    if (id == self_) continue;
    coordinator_->NameSuccessor(id, revision);
    return;
  }
  coordinator_->NameSuccessor("", 0);
}

}  // namespace muster::rdzv::etcd
