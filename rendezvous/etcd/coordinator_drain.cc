// Coordinator (coordinator.h): `muster drain` with the etcd backend (docs/guides/preemption.md).
// The command's request reaches the coordinator through the watch; the Job tells every
// node (Job::Preempt), exactly as JobRegistry::Drain does for muster's own server. Also a
// preempted coordinator's own leaving, and the preemptions a next coordinator continues
// (carried_preemptions.h).
#include <algorithm>
#include <optional>

#include "muster/v1/etcd.pb.h"
#include "rendezvous/etcd/coordinator.h"
#include "rendezvous/wire/status_convert.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {

absl::StatusOr<NodeInfo> Coordinator::Drain(const std::string& node_id, const std::string& host,
                                            const std::string& reason, absl::Time now) {
  return host_.Drain(node_id, host, reason, now);  // published (Deliver)
}

v1::EtcdAnswer Coordinator::AnswerDrain(const v1::DrainRequest& request, absl::Time now) {
  absl::StatusOr<NodeInfo> drained =
      Drain(request.node_id(), request.host(), request.reason(), now);
  v1::EtcdAnswer answer;
  if (drained.ok()) {
    answer.set_node_id(drained->node_id);
    answer.set_host(drained->host);
  } else {
    answer.mutable_error()->set_code(wire::ToWireCode(drained.status().code()));
    answer.mutable_error()->set_message(std::string(drained.status().message()));
  }
  return answer;
}

void Coordinator::ContinuePreemption(absl::Time now) {
  std::optional<Preemption> due = carried_.TakeDue(now);
  if (!due) return;
  spdlog::info("etcd rendezvous: node {} left as the previous coordinator's preemption said ({})",
               due->node_id, due->reason);
  host_.PreemptedNodeLeft(*due, now);  // published (Deliver)
}

void Coordinator::SavePreemptions(v1::EtcdJobState* state) const {
  // The preempted node leaves within --shutdown-timeout and the SIGKILL grace after it;
  // one that has left is this Job's business already (a next one would count it twice).
  for (const Preemption& p : host_.job().preempting()) {
    const std::vector<NodeInfo>& in = host_.job().participants();
    if (std::none_of(in.begin(), in.end(),
                     [&](const NodeInfo& n) { return n.node_id == p.node_id; })) {
      continue;
    }
    SavePreemption(p, p.since + host_.job().spec().stop_timeout, state);
  }
  carried_.SaveTo(state);
}

void Coordinator::PreemptedSelfLeaves(const std::string& self_id, absl::Time now) {
  for (const Preemption& p : host_.job().preempting()) {
    if (p.node_id == self_id) return NodeGone(self_id, now);
  }
}

}  // namespace muster::rdzv::etcd
