#include "rendezvous/core/hang.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace muster::rdzv {
namespace {

// The groups listed in a verdict at most (it travels as a root cause's stderr lines).
constexpr size_t kMaxGroupLines = 20;

struct Member {
  const NodeStacks* node;
  const RankStack* rank;
};

// Ranks with the same one-line stack (or the same reason for having none).
struct Group {
  std::string stack;  // "unavailable: why" for ranks without one
  std::vector<Member> members;
  bool collective = false;
};

std::string Ranks(const std::vector<Member>& members) {
  std::vector<int> ranks;
  for (const Member& m : members) ranks.push_back(m.rank->rank);
  std::sort(ranks.begin(), ranks.end());
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {  // "0-6,8,10-11"
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    absl::StrAppend(&out, i == 0 ? "" : ",", ranks[i]);
    if (j > i) absl::StrAppend(&out, "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

std::vector<Group> GroupByStack(const std::vector<NodeStacks>& nodes) {
  std::vector<Group> groups;
  for (const NodeStacks& n : nodes) {
    for (const RankStack& r : n.ranks) {
      std::string stack = r.unavailable.empty() ? r.text : "unavailable: " + r.unavailable;
      auto same = std::find_if(groups.begin(), groups.end(),
                               [&](const Group& g) { return g.stack == stack; });
      if (same == groups.end()) {
        same = groups.insert(groups.end(), Group{.stack = stack,
                                                 .collective = r.unavailable.empty() &&
                                                               LooksLikeCollective(r.text)});
      }
      same->members.push_back({&n, &r});
    }
  }
  for (Group& g : groups) {
    std::sort(g.members.begin(), g.members.end(),
              [](const Member& a, const Member& b) { return a.rank->rank < b.rank->rank; });
  }
  // Where the others wait first: the most ranks, then a collective, then the lowest rank.
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return std::make_tuple(-static_cast<int>(a.members.size()), !a.collective,
                           a.members[0].rank->rank) <
           std::make_tuple(-static_cast<int>(b.members.size()), !b.collective,
                           b.members[0].rank->rank);
  });
  return groups;
}

}  // namespace

bool LooksLikeCollective(const std::string& stack) {
  static constexpr const char* kMarks[] = {
      "distributed_c10d.py", "c10d_logger.py", "all_reduce", "all_gather",       "reduce_scatter",
      "broadcast",           "barrier",        "all_to_all", "monitored_barrier"};
  return std::any_of(std::begin(kMarks), std::end(kMarks),
                     [&](const char* m) { return absl::StrContains(stack, m); });
}

HangVerdict JudgeHang(const std::vector<NodeStacks>& nodes) {
  HangVerdict v;
  std::vector<Group> groups = GroupByStack(nodes);
  if (groups.empty()) {
    v.line = "no rank answered with a stack";
    return v;
  }
  std::vector<std::string> lines;
  for (const Group& g : groups) {
    if (lines.size() == kMaxGroupLines) {
      lines.push_back(absl::StrCat("... ", groups.size() - kMaxGroupLines, " more groups"));
      break;
    }
    lines.push_back(absl::StrCat(Ranks(g.members), ": ", g.stack));
  }
  v.groups = absl::StrJoin(lines, "\n");
  // The culprit: the lowest rank outside the first group, else the first group's lowest.
  Member culprit = groups[0].members[0];
  if (groups.size() == 1) {
    v.line = absl::StrCat("every rank waits in: ", groups[0].stack);
  } else {
    std::vector<Member> outside;
    std::vector<std::string> where;
    for (size_t i = 1; i < groups.size(); ++i) {
      outside.insert(outside.end(), groups[i].members.begin(), groups[i].members.end());
      where.push_back(groups.size() == 2
                          ? groups[i].stack
                          : absl::StrCat(Ranks(groups[i].members), " in ", groups[i].stack));
    }
    std::sort(outside.begin(), outside.end(),
              [](const Member& a, const Member& b) { return a.rank->rank < b.rank->rank; });
    culprit = outside[0];
    v.line = absl::StrCat(Ranks(outside), outside.size() == 1 ? " is" : " are",
                          groups[0].collective ? " not in the collective the others wait in: "
                                               : " not where the others wait: ",
                          absl::StrJoin(where, "; "));
  }
  v.node_id = culprit.node->node_id;
  v.host = culprit.node->host;
  v.rank = culprit.rank->rank;
  v.local_rank = culprit.rank->local_rank;
  v.pid = culprit.rank->pid;
  return v;
}

}  // namespace muster::rdzv
