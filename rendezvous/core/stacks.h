// Job-wide stacks (issue 17 item 1, docs/guides/hangs-and-stacks.md "Stacks") as plain data: what
// one agent reports for its workers, and what the server gathers from every agent for `muster
// stacks`.
#ifndef MUSTER_RENDEZVOUS_CORE_STACKS_H_
#define MUSTER_RENDEZVOUS_CORE_STACKS_H_

#include <string>
#include <vector>

namespace muster::rdzv {

// One worker's Python stacks: faulthandler's text (every thread, most recent call first),
// or, when there is none, why ("no stack hook in pid 12 (...)").
struct RankStack {
  int rank = 0;
  int local_rank = 0;
  int pid = 0;
  std::string text;
  std::string unavailable;

  bool operator==(const RankStack&) const = default;
};

// One node's answer. `unavailable` is set (and `ranks` empty) when the node did not answer.
struct NodeStacks {
  std::string node_id;
  std::string host;
  int group_rank = -1;
  std::vector<RankStack> ranks;  // by rank
  std::string unavailable;

  bool operator==(const NodeStacks&) const = default;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_STACKS_H_
