#include "rendezvous/registry/stacks_broker.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace muster::rdzv {

int64_t StacksBroker::Open(const std::vector<std::string>& node_ids) {
  MutexLock lock(&mu_);
  int64_t id = ++last_id_;
  open_[id].waiting.insert(node_ids.begin(), node_ids.end());
  return id;
}

void StacksBroker::Deliver(const std::string& node_id, int64_t id, std::vector<RankStack> ranks) {
  {
    MutexLock lock(&mu_);
    auto it = open_.find(id);
    if (it == open_.end() || it->second.waiting.erase(node_id) == 0) return;
    it->second.answers[node_id] = std::move(ranks);
  }
  answered_.SignalAll();
}

std::map<std::string, std::vector<RankStack>> StacksBroker::Wait(int64_t id, absl::Time deadline) {
  MutexLock lock(&mu_);
  auto it = open_.find(id);
  if (it == open_.end()) return {};
  while (!it->second.waiting.empty()) {
    if (answered_.WaitWithDeadline(&mu_, deadline)) break;
  }
  std::map<std::string, std::vector<RankStack>> answers = std::move(it->second.answers);
  open_.erase(it);
  return answers;
}

}  // namespace muster::rdzv
