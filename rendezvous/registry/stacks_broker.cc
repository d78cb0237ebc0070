#include "rendezvous/registry/stacks_broker.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace muster::rdzv {

int64_t StacksBroker::Open(const std::vector<std::string>& node_ids) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t id = ++last_id_;
  open_[id].waiting.insert(node_ids.begin(), node_ids.end());
  return id;
}

void StacksBroker::Deliver(const std::string& node_id, int64_t id, std::vector<RankStack> ranks) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(id);
    if (it == open_.end() || it->second.waiting.erase(node_id) == 0) return;
    it->second.answers[node_id] = std::move(ranks);
  }
  answered_.notify_all();
}

std::map<std::string, std::vector<RankStack>> StacksBroker::Wait(int64_t id, absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = open_.find(id);
  if (it == open_.end()) return {};
  // Capped: chrono arithmetic overflows on an infinite deadline.
  absl::Duration left = std::min(deadline - absl::Now(), absl::Hours(24));
  answered_.wait_for(lock, absl::ToChronoNanoseconds(std::max(left, absl::ZeroDuration())),
                     [&] { return it->second.waiting.empty(); });
  std::map<std::string, std::vector<RankStack>> answers = std::move(it->second.answers);
  open_.erase(it);
  return answers;
}

}  // namespace muster::rdzv
