#include "base/duration.h"

#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace muster {

absl::StatusOr<absl::Duration> ParseDuration(std::string_view text) {
  std::string_view number = text;
  double unit_seconds = 1;
  struct Suffix {
    std::string_view name;
    double seconds;
  };
  // Longer suffixes first so that "ms" is not read as "s".
  static constexpr Suffix kSuffixes[] = {
      {"ms", 1e-3}, {"us", 1e-6}, {"h", 3600}, {"m", 60}, {"s", 1}};
  for (const Suffix& s : kSuffixes) {
    if (text.size() > s.name.size() && text.substr(text.size() - s.name.size()) == s.name) {
      number = text.substr(0, text.size() - s.name.size());
      unit_seconds = s.seconds;
      break;
    }
  }
  double value = 0;
  if (!absl::SimpleAtod(absl::string_view(number.data(), number.size()), &value) ||
      !std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", absl::string_view(text.data(), text.size()),
                     "' is not a duration; write e.g. 30s, 500ms, 10m or a "
                     "number of seconds"));
  }
  // Beyond absl::Duration's range (about 292 billion years) Seconds() saturates to an
  // infinite duration: "1e300h" would be a deadline that never comes (found by
  // tests/fuzz/flags_fuzz).
  absl::Duration d = absl::Seconds(value * unit_seconds);
  if (d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", absl::string_view(text.data(), text.size()), "' is too long a duration"));
  }
  return d;
}

namespace {

absl::Duration RoundTo(absl::Duration d, absl::Duration unit) {
  return absl::Floor(d + unit / 2, unit);
}

}  // namespace

std::string HumanDuration(absl::Duration d) {
  if (d < absl::Seconds(1) && d != absl::ZeroDuration()) {
    return absl::StrCat(absl::ToInt64Milliseconds(RoundTo(d, absl::Milliseconds(1))), "ms");
  }
  if (d < absl::Minutes(1)) {  // 1.5s, 3s: a tenth of a second at most
    return absl::StrCat(absl::ToDoubleSeconds(RoundTo(d, absl::Milliseconds(100))), "s");
  }
  return absl::StrCat(absl::ToInt64Seconds(RoundTo(d, absl::Seconds(1))), "s");
}

}  // namespace muster
