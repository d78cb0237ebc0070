#include "rendezvous/etcd/etcd_requests.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/mutex.h"
#include "muster/v1/etcd.pb.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/etcd/node_key.h"
#include "rendezvous/wire/proto_convert.h"
#include "rendezvous/wire/stacks_convert.h"
#include "rendezvous/wire/status_convert.h"

namespace muster::rdzv::etcd {
namespace {

using Answers = std::map<std::string, v1::EtcdAnswer>;  // by answering node id

std::string JobPrefix(const EtcdStatusQuery& q) {
  return absl::StrCat(q.prefix, "/", q.run_id, "/");
}

std::string RequestId() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x", rd(), rd());
}

absl::Status EtcdUnreachable(const EtcdStatusQuery& q, const absl::Status& s) {
  return absl::UnavailableError(
      absl::StrCat("etcd at ", absl::StrJoin(q.endpoints, ","), ": ", s.message()));
}

// Cancels `watch` at `deadline` unless Done() comes first (a watch's Next has no deadline).
class WatchDeadline {
 public:
  WatchDeadline(std::shared_ptr<EtcdWatch> watch, absl::Time deadline)
      : thread_([this, watch, deadline] {
          MutexLock lock(&mu_);
          while (!done_) {
            if (cv_.WaitWithDeadline(&mu_, deadline)) break;
          }
          if (!done_) watch->Cancel();
        }) {}
  ~WatchDeadline() {
    {
      MutexLock lock(&mu_);
      done_ = true;
    }
    cv_.SignalAll();
    thread_.join();
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Puts `request` with a lease of its own and gathers the answers until `enough` says so or
// `wait` has passed (then with those that came). The lease is revoked on the way out.
absl::StatusOr<Answers> Ask(EtcdClient& etcd, const EtcdStatusQuery& q,
                            const v1::EtcdRequest& request, absl::Duration wait,
                            const std::function<bool(const Answers&)>& enough) {
  absl::StatusOr<int64_t> lease = etcd.GrantLease(wait + absl::Seconds(2));
  if (!lease.ok()) return EtcdUnreachable(q, lease.status());
  const std::string id = RequestId();
  const std::string answers_prefix = absl::StrCat(JobPrefix(q), "answers/", id, "/");
  absl::StatusOr<int64_t> put =
      etcd.Put(absl::StrCat(JobPrefix(q), "requests/", id), request.SerializeAsString(), *lease);
  Answers answers;
  if (!put.ok()) {
    (void)etcd.RevokeLease(*lease);  // expires by itself otherwise
    return EtcdUnreachable(q, put.status());
  }
  std::shared_ptr<EtcdWatch> watch = etcd.WatchPrefix(answers_prefix, *put + 1);
  absl::Status watched;
  {
    WatchDeadline deadline(watch, absl::Now() + wait);
    while (!enough(answers)) {
      std::vector<WatchEvent> events;
      watched = watch->Next(&events, wait);
      if (!watched.ok()) break;
      for (const WatchEvent& e : events) {
        v1::EtcdAnswer a;
        if (e.deleted || !a.ParseFromString(e.kv.value)) continue;
        answers[e.kv.key.substr(answers_prefix.size())] = std::move(a);
      }
    }
  }
  watch->Cancel();
  (void)etcd.RevokeLease(*lease);  // the request and its answers go now
  if (!watched.ok() && !absl::IsCancelled(watched)) return EtcdUnreachable(q, watched);
  return answers;
}

absl::StatusOr<std::unique_ptr<EtcdClient>> ClientFor(const EtcdStatusQuery& q) {
  return EtcdClient::Create({.endpoints = q.endpoints,
                             .call_timeout = std::min(q.timeout, absl::Seconds(2)),
                             .security = q.security});
}

// The job's node keys: NodeInfo by node id. NotFound when there is none.
absl::StatusOr<std::map<std::string, NodeInfo>> JobNodes(EtcdClient& etcd,
                                                         const EtcdStatusQuery& q) {
  const std::string prefix = JobPrefix(q) + "nodes/";
  absl::StatusOr<RangeResult> got = etcd.RangePrefix(prefix);
  if (!got.ok()) return EtcdUnreachable(q, got.status());
  std::map<std::string, NodeInfo> nodes;
  for (const KeyValue& kv : got->kvs) {
    absl::StatusOr<v1::EtcdNode> value = ParseNodeKey(kv);
    if (!value.ok()) continue;  // no agent's (node_key.h)
    NodeInfo node;
    JobSpec spec;
    wire::FromProto(value->join(), &node, &spec);
    nodes[kv.key.substr(prefix.size())] = node;
  }
  if (nodes.empty()) {
    return absl::NotFoundError(absl::StrCat("etcd has no node of job ", q.run_id, " under ", prefix,
                                            ": no such job running"));
  }
  return nodes;
}

// Group ranks from the job's status key, where there is one (-1 otherwise).
std::map<std::string, int> GroupRanks(EtcdClient& etcd, const EtcdStatusQuery& q) {
  std::map<std::string, int> out;
  absl::StatusOr<RangeResult> got = etcd.Get(JobPrefix(q) + "status");
  v1::JobStatusReply reply;
  if (!got.ok() || got->kvs.empty() || !reply.ParseFromString(got->kvs[0].value)) return out;
  for (const NodeStatus& n : wire::FromProto(reply).nodes) out[n.node_id] = n.group_rank;
  return out;
}

}  // namespace

absl::StatusOr<NodeInfo> DrainThroughEtcd(const EtcdStatusQuery& query, const std::string& node_id,
                                          const std::string& host, const std::string& reason) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd = ClientFor(query);
  if (!etcd.ok()) return etcd.status();
  absl::StatusOr<std::map<std::string, NodeInfo>> nodes = JobNodes(**etcd, query);
  if (!nodes.ok()) return nodes.status();
  v1::EtcdRequest request;
  request.mutable_drain()->set_run_id(query.run_id);
  request.mutable_drain()->set_node_id(node_id);
  request.mutable_drain()->set_host(host);
  request.mutable_drain()->set_reason(reason);
  absl::StatusOr<Answers> answers =
      Ask(**etcd, query, request, query.timeout, [](const Answers& a) { return !a.empty(); });
  if (!answers.ok()) return answers.status();
  if (answers->empty()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "no coordinator of job ", query.run_id, " answered within ",
        absl::FormatDuration(query.timeout),
        " (a coordinator change under way? `muster status --rdzv-backend etcd` shows the job)"));
  }
  const v1::EtcdAnswer& a = answers->begin()->second;
  if (a.has_error()) {
    return absl::Status(wire::ToAbslCode(a.error().code()), a.error().message());
  }
  return NodeInfo{.node_id = a.node_id(), .host = a.host()};
}

absl::StatusOr<std::vector<NodeStacks>> StacksThroughEtcd(const EtcdStatusQuery& query,
                                                          absl::Duration collect) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd = ClientFor(query);
  if (!etcd.ok()) return etcd.status();
  absl::StatusOr<std::map<std::string, NodeInfo>> nodes = JobNodes(**etcd, query);
  if (!nodes.ok()) return nodes.status();
  std::map<std::string, int> group_ranks = GroupRanks(**etcd, query);
  v1::EtcdRequest request;
  request.mutable_stacks()->set_timeout_ms(absl::ToInt64Milliseconds(collect));
  const absl::Duration wait = collect + absl::Seconds(1);
  absl::StatusOr<Answers> answers = Ask(**etcd, query, request, wait, [&](const Answers& a) {
    return std::all_of(nodes->begin(), nodes->end(),
                       [&](const auto& n) { return a.count(n.first) > 0; });
  });
  if (!answers.ok()) return answers.status();
  std::vector<NodeStacks> out;
  for (const auto& [id, info] : *nodes) {
    auto rank = group_ranks.find(id);
    NodeStacks n{.node_id = id,
                 .host = info.host,
                 .group_rank = rank == group_ranks.end() ? -1 : rank->second};
    auto a = answers->find(id);
    if (a == answers->end()) {
      n.unavailable = absl::StrCat("no answer within ", absl::FormatDuration(wait));
    } else {
      for (const v1::RankStack& r : a->second.ranks()) n.ranks.push_back(wire::FromProto(r));
    }
    out.push_back(std::move(n));
  }
  std::stable_sort(out.begin(), out.end(), [](const NodeStacks& a, const NodeStacks& b) {
    return (a.group_rank < 0 ? INT32_MAX : a.group_rank) <
           (b.group_rank < 0 ? INT32_MAX : b.group_rank);
  });
  return out;
}

}  // namespace muster::rdzv::etcd
