// Parses human durations used by flags and env: "30s", "500ms", "10m", "1h",
// "1.5s", "30".
#ifndef MUSTER_BASE_DURATION_H_
#define MUSTER_BASE_DURATION_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace muster {

// A bare number means seconds (torchrun's --shutdown-timeout and
// --monitor-interval take plain seconds). Negative durations are rejected.
absl::StatusOr<absl::Duration> ParseDuration(std::string_view text);

// "30s", "1.5s", "250ms": the inverse used by --dry-run and log lines, rounded for people
// (3.00309s is "3s", 1.26s "1.3s", 90.4s "90s", 0.2504s "250ms").
std::string HumanDuration(absl::Duration d);

}  // namespace muster

#endif  // MUSTER_BASE_DURATION_H_
