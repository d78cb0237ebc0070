#include "rendezvous/etcd/carried_preemptions.h"

#include <algorithm>

#include "muster/v1/etcd.pb.h"

namespace muster::rdzv::etcd {

void SavePreemption(const Preemption& p, absl::Time deadline, v1::EtcdJobState* state) {
  v1::EtcdPreemption* saved = state->add_preempting();
  saved->set_node_id(p.node_id);
  saved->set_host(p.host);
  saved->set_reason(p.reason);
  saved->set_since_unix_ms(absl::ToUnixMillis(p.since));
  saved->set_deadline_unix_ms(absl::ToUnixMillis(deadline));
}

void CarriedPreemptions::Load(const v1::EtcdJobState& state,
                              const std::vector<std::string>& present, absl::Time now) {
  carried_.clear();
  awaited_.clear();
  std::set<std::string> preempted;
  for (const v1::EtcdPreemption& saved : state.preempting()) {
    const absl::Time deadline = absl::FromUnixMillis(saved.deadline_unix_ms());
    if (now >= deadline) continue;
    carried_.push_back(Carried{
        .preemption = Preemption{.node_id = saved.node_id(),
                                 .host = saved.host(),
                                 .reason = saved.reason(),
                                 .since = absl::FromUnixMillis(saved.since_unix_ms())},
        .deadline = deadline,
        .gone = std::find(present.begin(), present.end(), saved.node_id()) == present.end()});
    preempted.insert(saved.node_id());
  }
  if (carried_.empty()) return;
  for (const std::string& id : present) {
    if (preempted.count(id) == 0) awaited_.insert(id);
  }
}

void CarriedPreemptions::SaveTo(v1::EtcdJobState* state) const {
  for (const Carried& c : carried_) SavePreemption(c.preemption, c.deadline, state);
}

void CarriedPreemptions::NodeGone(const std::string& node_id) {
  awaited_.erase(node_id);
  for (Carried& c : carried_) {
    if (c.preemption.node_id == node_id) c.gone = true;
  }
}

std::optional<Preemption> CarriedPreemptions::TakeDue(absl::Time now) {
  carried_.erase(std::remove_if(carried_.begin(), carried_.end(),
                                [&](const Carried& c) { return !c.gone && now >= c.deadline; }),
                 carried_.end());
  if (carried_.empty()) {
    awaited_.clear();
    return std::nullopt;
  }
  const bool all_gone =
      std::all_of(carried_.begin(), carried_.end(), [](const Carried& c) { return c.gone; });
  if (!all_gone || !awaited_.empty()) return std::nullopt;
  Preemption first = carried_.front().preemption;
  carried_.clear();
  return first;
}

}  // namespace muster::rdzv::etcd
