// Hang detection's job-wide rule (issue 17 item 2, docs/guides/hangs-and-stacks.md "Hangs"), as
// plain data and pure functions: what an agent reports when none of its workers has used CPU for
// the hang timeout (a Stall), and the verdict the job draws once every node of the round has
// stalled: which rank is not in the collective the others wait in.
#ifndef MUSTER_RENDEZVOUS_CORE_HANG_H_
#define MUSTER_RENDEZVOUS_CORE_HANG_H_

#include <string>
#include <vector>

#include "rendezvous/core/stacks.h"

namespace muster::rdzv {

// One node's report: its workers stalled (or progress again, `stalled` false).
struct Stall {
  bool stalled = false;
  bool restartable = true;  // --hang-action restart: the hang restarts the job
  // Each local rank's main-thread stack in one line ("all_reduce <- c10d_logger.py:81
  // wrapper <- train.py:57 step"), the same on two samples; or why there is none.
  std::vector<RankStack> ranks;

  bool operator==(const Stall&) const = default;
};

// The job's reading of a hang.
struct HangVerdict {
  // "rank 3 is not in the collective the others wait in: time.sleep <- train.py:12";
  // "every rank waits in: ..." when all stacks are the same.
  std::string line;
  // The first culprit (the lowest rank outside the others' stack; the lowest rank when all
  // stacks are the same).
  std::string node_id;
  std::string host;
  int rank = -1;
  int local_rank = -1;
  int pid = 0;
  // A line per group of identical stacks: "ranks 0-2: all_reduce <- ...".
  std::string groups;
};

// Groups the ranks of `nodes` by stack. The stack most ranks share is where "the others"
// wait; between groups of the same size, one that looks like a collective (a torch
// distributed frame or a collective's name) wins, then the lowest rank.
HangVerdict JudgeHang(const std::vector<NodeStacks>& nodes);

// Whether a one-line stack has the frames of a rank waiting in a torch collective (a
// torch.distributed frame or a collective's name); stragglers use it too (straggler.h).
bool LooksLikeCollective(const std::string& stack);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_HANG_H_
