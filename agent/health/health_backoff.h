// HealthBackoff: when a node its health gate keeps out of rounds checks again
// (docs/guides/health-gate.md). The first re-check comes soon (a stale process that was
// just being killed, a disk being cleaned), later ones less often, so that a node sick for
// hours costs a check every kMax, not a busy loop. Pure; the gate arms the loop's timer.
#ifndef MUSTER_AGENT_HEALTH_HEALTH_BACKOFF_H_
#define MUSTER_AGENT_HEALTH_HEALTH_BACKOFF_H_

#include "absl/time/time.h"

namespace muster {

class HealthBackoff {
 public:
  static constexpr absl::Duration kFirst = absl::Seconds(1);
  static constexpr absl::Duration kMax = absl::Seconds(30);

  HealthBackoff(absl::Duration first = kFirst, absl::Duration max = kMax)
      : first_(first), max_(max) {}

  // A check failed: the wait before the next one, from its end. `first`, then twice the
  // previous wait, at most `max`.
  absl::Duration Next();
  // A check passed: the next failure waits `first` again.
  void Reset() { failures_ = 0; }
  // Failed checks since the last pass.
  int failures() const { return failures_; }

 private:
  absl::Duration first_;
  absl::Duration max_;
  int failures_ = 0;
};

}  // namespace muster

#endif  // MUSTER_AGENT_HEALTH_HEALTH_BACKOFF_H_
