#include "rendezvous/core/straggler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/core/hang.h"

namespace muster::rdzv {
namespace {

// Fewer job-wide samples than the window name no one: too little evidence (with 4 even ranks
// one of them is last in 3 of the first 10 samples often enough to matter).
int MinSamples(int window) { return std::max(1, window); }

std::string Percent(double share) {
  return absl::StrCat(static_cast<int>(std::lround(share * 100)), " %");
}

}  // namespace

bool Starting(const std::vector<NodeStacks>& nodes) {
  for (const NodeStacks& n : nodes) {
    for (const RankStack& r : n.ranks) {
      if (absl::StrContains(r.text, "init_process_group")) return true;
    }
  }
  return false;
}

std::vector<int> LastRanks(const std::vector<NodeStacks>& nodes,
                           std::map<int, std::string>* stacks) {
  int waiting = 0;
  std::vector<const RankStack*> outside;
  for (const NodeStacks& n : nodes) {
    for (const RankStack& r : n.ranks) {
      if (!r.unavailable.empty() || r.text.empty()) continue;  // unknown: neither
      if (LooksLikeCollective(r.text)) {
        ++waiting;
      } else {
        outside.push_back(&r);
      }
    }
  }
  std::vector<int> last;
  const int known = waiting + static_cast<int>(outside.size());
  if (outside.empty() || waiting == 0 || 2 * waiting < known) return last;
  for (const RankStack* r : outside) {
    last.push_back(r->rank);
    if (stacks != nullptr) (*stacks)[r->rank] = r->text;
  }
  std::sort(last.begin(), last.end());
  return last;
}

void StragglerTally::Clear() {
  fresh_.clear();
  window_.clear();
  named_.reset();
}

std::optional<StragglerVerdict> StragglerTally::Add(const std::string& node_id,
                                                    const std::vector<NodeStacks>& participants,
                                                    const StragglerSample& sample) {
  if (std::none_of(participants.begin(), participants.end(),
                   [&](const NodeStacks& n) { return n.node_id == node_id; })) {
    return std::nullopt;
  }
  fresh_[node_id] = Fresh{.tick = sample.tick, .ranks = sample.ranks};
  std::vector<NodeStacks> job = participants;
  for (NodeStacks& n : job) {
    auto it = fresh_.find(n.node_id);
    // A node's sample of this tick still to come (or it skipped the tick: a later one joins)
    if (it == fresh_.end() || it->second.tick != sample.tick) return std::nullopt;
    n.ranks = it->second.ranks;
  }
  fresh_.clear();
  if (Starting(job)) return std::nullopt;
  Seen seen;
  seen.last = LastRanks(job, &seen.stacks);
  window_.push_back(std::move(seen));
  const size_t window = static_cast<size_t>(std::max(1, sample.window));
  while (window_.size() > window) window_.pop_front();
  return Judge(job, sample.window, sample.share);
}

std::optional<StragglerVerdict> StragglerTally::Judge(const std::vector<NodeStacks>& job,
                                                      int window, double share) {
  std::map<int, int> count;
  for (const Seen& s : window_) {
    for (int r : s.last) ++count[r];
  }
  const int n = static_cast<int>(window_.size());
  int top = -1;
  for (const auto& [rank, c] : count) {
    if (top < 0 || c > count[top]) top = rank;  // ties: the lowest rank
  }
  auto share_of = [&](int rank) {
    auto it = count.find(rank);
    return it == count.end() ? 0.0 : static_cast<double>(it->second) / n;
  };
  const bool top_qualifies = top >= 0 && n >= MinSamples(window) && share_of(top) >= share;
  if (named_) {
    const int named = named_->rank;
    if (top_qualifies && top != named && share_of(top) > share_of(named)) {
      // another rank is now the one the others wait for: name it (below)
    } else if (share_of(named) < share / 2) {
      StragglerVerdict cleared{.rank = -1, .samples = n};
      cleared.share = share_of(named);
      cleared.line = absl::StrCat("rank ", named, " no longer keeps the others waiting (last in ",
                                  count[named], " of ", n, " samples, ", Percent(cleared.share),
                                  "): no straggler");
      named_.reset();
      return cleared;
    } else {
      named_->share = share_of(named);  // still named; the status follows the share
      named_->samples = n;
      return std::nullopt;
    }
  } else if (!top_qualifies) {
    return std::nullopt;
  }
  StragglerVerdict v{.rank = top, .share = share_of(top), .samples = n};
  for (const NodeStacks& node : job) {
    for (const RankStack& r : node.ranks) {
      if (r.rank != top) continue;
      v.local_rank = r.local_rank;
      v.node_id = node.node_id;
      v.host = node.host;
    }
  }
  std::map<std::string, int> where;
  for (const Seen& s : window_) {
    auto it = s.stacks.find(top);
    if (it != s.stacks.end()) ++where[it->second];
  }
  for (const auto& [stack, c] : where) {
    if (v.stack.empty() || c > where[v.stack]) v.stack = stack;
  }
  v.line =
      absl::StrCat("rank ", top, " (local rank ", v.local_rank, " on node ", v.node_id, ", host ",
                   v.host, ") is the straggler: the others waited for it in ", count[top], " of ",
                   n, " samples (", Percent(v.share), "); it was in: ", v.stack);
  named_ = v;
  return v;
}

}  // namespace muster::rdzv
