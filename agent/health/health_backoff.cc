#include "agent/health/health_backoff.h"

#include <algorithm>

namespace muster {

absl::Duration HealthBackoff::Next() {
  absl::Duration wait = first_;
  // Doubling past max_ stops early, so the shift never overflows.
  for (int i = 0; i < failures_ && wait < max_; ++i) wait *= 2;
  ++failures_;
  return std::min(wait, max_);
}

std::optional<absl::Duration> CheckSchedule::SpareWait() const {
  if (!spare_ || spare_interval_ <= absl::ZeroDuration()) return std::nullopt;
  return spare_interval_;
}

std::optional<absl::Duration> CheckSchedule::Checked(bool healthy) {
  healthy_ = healthy;
  if (!healthy) return backoff_.Next();
  backoff_.Reset();
  return SpareWait();
}

bool CheckSchedule::SpareChanged(bool spare, std::optional<absl::Duration>* wait) {
  if (spare == spare_) return false;
  spare_ = spare;
  if (!healthy_) return false;  // the backoff goes on until a check passes
  *wait = SpareWait();
  return true;
}

}  // namespace muster
