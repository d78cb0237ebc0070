// SettleWindow (settle_window.h): the settle window of a Job (job.h). When a node is lost while
// workers run collectives, the other nodes' workers fail first (gloo/NCCL "connection reset by
// peer", exit 1, fatal under the ExitCode policy) and their agents report it before the job's owner
// learns of the loss (an etcd lease that ends, a stream that closes). Deciding on the first report
// would fail the whole job for what is a membership change (issue 16). So a failure that
// would finish a round of several nodes is held for kSettleWindow: a participant lost
// meanwhile makes it a consequence of the loss (Excuse, from job.cc's RemoveNode), else it finishes
// the job as it would have at once. A restartable failure with budget left decides at once: it
// restarts the round anyway, and restart latency matters (bench B5).
//
// The round stays kRunning while a failure is held: nothing has been decided, so no agent
// is told anything (its workers run on, or are ending by themselves); kStopping would stop
// every node's workers for a round that may instead end the job. Meanwhile a later failure
// of the round is recorded for the status but decides nothing (the held one is the root
// cause), successes decide nothing, a node that joins waits, and reports of other rounds
// are ignored as always.
//
// kWindow = 3 s, measured with tests/integration/test_etcd_settle.py (a node cut off
// from etcd, the others' gloo all_reduce failing with exit 1; this 2-core machine at load 2
// to 8): the survivors' failure reached the coordinator 0.2 to 0.4 s before the lease's end
// with a lease TTL of 2 s (5 runs), 0.6 to 0.8 s with a TTL of 4 s at load 6 to 8 (3 runs),
// 0.4 to 0.9 s with a TTL of 6 s (3 runs). The gap is the fence's margin (the node stops its
// workers min(TTL / 10, 500 ms) before etcd may drop its lease), etcd's check for expired
// leases (every 500 ms) and the watch's delivery: about 1.2 s at most on an idle machine, so
// 3 s leaves room for a loaded one. The cost: a job that really failed ends 3 s later.
#include "rendezvous/core/settle_window.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace muster::rdzv {

bool SettleWindow::Hold(const char* cause, const Failure& failure, const std::string& what,
                        size_t participants, absl::Time now) {
  if (held_ || participants < 2) return false;
  held_ = HeldFailure{
      .failure = failure, .what = what, .cause = cause, .since = now, .until = now + kWindow};
  return true;
}

std::optional<HeldFailure> SettleWindow::Due(absl::Time now) {
  if (!held_ || now < held_->until) return std::nullopt;
  std::optional<HeldFailure> due = std::move(held_);
  held_.reset();
  return due;
}

std::string SettleWindow::Excuse(const std::string& lost, absl::Time now) {
  if (!held_) return "";
  const int64_t tenths =
      absl::ToInt64Milliseconds(now - held_->since + absl::Milliseconds(50)) / 100;
  std::string excuse =
      absl::StrCat(held_->what, ", ", tenths / 10, ".", tenths % 10, " s before node ", lost,
                   " was lost: judged a consequence of the loss");
  held_.reset();
  return excuse;
}

std::string HoldNotice(const HeldFailure& held) {
  return absl::StrCat("holding the failure of rank ", held.failure.rank, " on ", held.failure.host,
                      " (", held.failure.what, ") for ",
                      absl::FormatDuration(held.until - held.since),
                      ": a node lost meanwhile makes it a membership change");
}

}  // namespace muster::rdzv
