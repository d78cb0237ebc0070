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

}  // namespace muster
