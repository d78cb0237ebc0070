// HealthBackoff: when a node its health gate keeps out of rounds checks again
// (docs/guides/health-gate.md). The first re-check comes soon (a stale process that was
// just being killed, a disk being cleaned), later ones less often, so that a node sick for
// hours costs a check every kMax, not a busy loop. Pure; the gate arms the loop's timer.
//
// CheckSchedule: when the gate checks between the checks before a join and before a stop
// report (docs/guides/health-gate.md "What is checked"): a node kept out on the backoff, a
// healthy hot spare every --spare-check-interval (docs/guides/spares.md), any other node
// not until its next join or stop report. Pure as well.
#ifndef MUSTER_AGENT_HEALTH_HEALTH_BACKOFF_H_
#define MUSTER_AGENT_HEALTH_HEALTH_BACKOFF_H_

#include <optional>

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

class CheckSchedule {
 public:
  // `spare_interval`: --spare-check-interval; zero: a spare is not checked while it waits.
  explicit CheckSchedule(absl::Duration spare_interval, HealthBackoff backoff = HealthBackoff())
      : spare_interval_(spare_interval), backoff_(backoff) {}

  // A check ended, `healthy` or not: the wait before the next one, from its end; nullopt
  // when none is due (a healthy node that is no spare, or a spare with the interval off).
  std::optional<absl::Duration> Checked(bool healthy);
  // The job says whether the node is a hot spare. True when the check planned changes:
  // then `*wait` is the new wait from now (nullopt: none). A node kept out keeps its
  // backoff whatever it is told; a healthy one starts or ends the spare's interval.
  bool SpareChanged(bool spare, std::optional<absl::Duration>* wait);

  bool spare() const { return spare_; }
  // Failed checks since the last pass.
  int failures() const { return backoff_.failures(); }

 private:
  std::optional<absl::Duration> SpareWait() const;

  absl::Duration spare_interval_;
  HealthBackoff backoff_;
  bool healthy_ = true;
  bool spare_ = false;
};

}  // namespace muster

#endif  // MUSTER_AGENT_HEALTH_HEALTH_BACKOFF_H_
