// SettleWindow: the fatal failure a Job holds before it finishes the job (docs/design.md
// §4.3, docs/reference/exit-codes.md). When a node is lost while workers run collectives,
// the other nodes' workers fail first (exit 1) and their agents report it before the job's
// owner learns of the loss; a failure that would finish a round of several nodes is held
// for kWindow so that a participant lost meanwhile makes it a membership change
// (settle_window.cc says how kWindow was chosen). Pure: every call takes `now`.
#ifndef MUSTER_RENDEZVOUS_CORE_SETTLE_WINDOW_H_
#define MUSTER_RENDEZVOUS_CORE_SETTLE_WINDOW_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "rendezvous/core/types.h"

namespace muster::rdzv {

// A fatal failure held for the settle window.
struct HeldFailure {
  Failure failure;              // the first fatal one of the round: the root cause
  std::string what;             // "rank R on HOST failed: exit 1[: detail]"
  const char* cause = nullptr;  // FailRound's cause (nullptr: by the failure's restartability)
  absl::Time since;             // when it was reported
  absl::Time until;             // when it finishes the job unless a participant is lost first
};

class SettleWindow {
 public:
  // How long a fatal failure of a round of several nodes waits for a loss that would
  // explain it.
  static constexpr absl::Duration kWindow = absl::Seconds(3);

  // Holds `failure` (described by `what`) for kWindow when the round has several
  // `participants` and nothing is held; false: the caller decides now.
  bool Hold(const char* cause, const Failure& failure, const std::string& what, size_t participants,
            absl::Time now);
  // The held failure once its window has passed, no longer held; nullopt otherwise.
  std::optional<HeldFailure> Due(absl::Time now);
  // Drops the held failure as a consequence of `lost`'s loss; returns what the reason says
  // of it ("" when nothing was held).
  std::string Excuse(const std::string& lost, absl::Time now);
  // The round ended otherwise: whatever stopped it judged the held failure.
  void Drop() { held_.reset(); }

  bool holding() const { return held_.has_value(); }
  const std::optional<HeldFailure>& held() const { return held_; }
  // When the held failure is due; nullopt when nothing is held.
  std::optional<absl::Time> deadline() const {
    return held_ ? std::optional<absl::Time>(held_->until) : std::nullopt;
  }

 private:
  std::optional<HeldFailure> held_;  // a round that runs only: a fatal failure in its window
};

// The owner's log line for a failure just held: "holding the failure of rank R on HOST
// (exit 1) for 3s: a node lost meanwhile makes it a membership change".
std::string HoldNotice(const HeldFailure& held);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_SETTLE_WINDOW_H_
