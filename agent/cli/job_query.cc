#include "agent/cli/job_query.h"

#include "absl/strings/str_cat.h"
#include "base/duration.h"

namespace muster {

absl::StatusOr<absl::Duration> PositiveDuration(const FlagValue& value) {
  // A wait without a deadline is no answer either.
  absl::StatusOr<absl::Duration> d = ParseDuration(value.text);
  if (!d.ok() || *d <= absl::ZeroDuration() || *d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        value.where, ": '", value.text, "' is not a positive duration (e.g. 10, 10s, 500ms)"));
  }
  return *d;
}

}  // namespace muster
