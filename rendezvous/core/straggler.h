// Stragglers' job-wide rule (issue 30 item 4, docs/guides/hangs-and-stacks.md "Stragglers"), as
// plain data and a small class: each node reports its ranks' main-thread stacks every sample
// interval (a StragglerSample); once every node of the round has reported the same tick, the
// job takes them together as one job-wide sample (unless the job is still starting) and asks which
// ranks the others wait for: when at least half the ranks are in a collective and some are not, the
// ranks outside are "last". Over the last `window` job-wide samples, the rank that was last in at
// least `share` of them is the straggler; it stays named until its share falls below half of
// `share`.
#ifndef MUSTER_RENDEZVOUS_CORE_STRAGGLER_H_
#define MUSTER_RENDEZVOUS_CORE_STRAGGLER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/core/stacks.h"

namespace muster::rdzv {

// One node's sample: its ranks' main-thread stacks in one line each (or why there is none),
// and the rule's parameters the agents were given (--straggler-window, --straggler-share).
struct StragglerSample {
  // Which sample: the wall clock divided by the interval. Every node samples at the same
  // ticks of the wall clock, so that the samples of one tick are taken at the same moment
  // (as close as the nodes' clocks agree); the job joins samples of the same tick only.
  int64_t tick = 0;
  int window = 30;  // job-wide samples the share is taken over
  double share = 0.4;
  std::vector<RankStack> ranks;

  bool operator==(const StragglerSample&) const = default;
};

// The rank named (Event::Kind::kStraggler's payload and the status's `straggler`).
struct StragglerVerdict {
  int rank = -1;  // -1: no straggler (a verdict that clears one)
  int local_rank = -1;
  std::string node_id;
  std::string host;
  double share = 0;   // of the window's samples in which it was last
  int samples = 0;    // job-wide samples in the window
  std::string stack;  // where it was most often while the others waited
  // "rank 3 on node1 (host h1) kept the others waiting in 18 of 30 samples (60 %): ..."
  std::string line;

  bool operator==(const StragglerVerdict&) const = default;
};

// Whether some rank of the sample is still in init_process_group (the others wait there for
// the ranks still starting): such samples are not judged, the job is starting.
bool Starting(const std::vector<NodeStacks>& nodes);

// The ranks of one job-wide sample that the others wait for (by rank): empty unless at least
// half the ranks with a stack are in a collective (LooksLikeCollective) and some are not.
// Ranks without a stack are neither waiting nor last. `stacks` gets, per rank returned, the
// stack it was in.
std::vector<int> LastRanks(const std::vector<NodeStacks>& nodes,
                           std::map<int, std::string>* stacks = nullptr);

// The job's tally over one round (Job holds one; a new round starts a new one).
class StragglerTally {
 public:
  // A node of the round (`participants`: every node id of the round with its host, by group
  // rank) reported `sample`. Returns a verdict when the named straggler changed: a new rank
  // named, or (rank -1) the one named cleared.
  std::optional<StragglerVerdict> Add(const std::string& node_id,
                                      const std::vector<NodeStacks>& participants,
                                      const StragglerSample& sample);
  const std::optional<StragglerVerdict>& named() const { return named_; }
  void Clear();

 private:
  struct Seen {
    std::vector<int> last;
    std::map<int, std::string> stacks;
  };
  std::optional<StragglerVerdict> Judge(const std::vector<NodeStacks>& participants, int window,
                                        double share);

  struct Fresh {
    int64_t tick = 0;
    std::vector<RankStack> ranks;
  };
  std::map<std::string, Fresh> fresh_;  // node id -> its latest sample not yet used
  std::deque<Seen> window_;             // the job-wide samples, newest last
  std::optional<StragglerVerdict> named_;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_STRAGGLER_H_
