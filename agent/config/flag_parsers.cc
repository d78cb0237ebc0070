#include "agent/config/flag_parsers.h"

#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/wire_values.h"
#include "launch/exit_status.h"

namespace muster {
absl::Status FlagError(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

absl::StatusOr<int> ParseNonNegative(absl::string_view where, absl::string_view text) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0) {
    return FlagError(where, absl::StrCat("'", text, "' is not a non-negative integer"));
  }
  return value;
}

absl::StatusOr<bool> ParseSwitch(const FlagValue& value) {
  std::string lower = absl::AsciiStrToLower(value.text);
  if (lower == "1" || lower == "true" || lower == "yes") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower.empty()) return false;
  return FlagError(value.where, absl::StrCat("'", value.text, "' is not a boolean; use 1 or 0"));
}

std::optional<bool> ParseTorchBool(absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(text);
  if (lower == "1" || lower == "true" || lower == "t" || lower == "yes" || lower == "y") {
    return true;
  }
  if (lower == "0" || lower == "false" || lower == "f" || lower == "no" || lower == "n") {
    return false;
  }
  return std::nullopt;
}

// Each pair is exactly two numbers: "0:1:2" is an error, not 0:1.
absl::StatusOr<StreamSelection> ParseStreams(absl::string_view where, absl::string_view text) {
  StreamSelection sel;
  auto mask = [&](absl::string_view v) -> absl::StatusOr<int> {
    int m = 0;
    if (!absl::SimpleAtoi(v, &m) || m < 0 || m > 3) {
      return FlagError(
          where, absl::StrCat("'", v, "' must be 0 (none), 1 (stdout), 2 (stderr) or 3 (both)"));
    }
    return m;
  };
  absl::string_view t = text;
  if (t.find(':') == absl::string_view::npos) {
    ASSIGN_OR_RETURN(int m, mask(t));
    sel.by_rank[StreamSelection::kAllRanks] = m;
    return sel;
  }
  for (absl::string_view part : absl::StrSplit(t, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(part, ':');
    int rank = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[0], &rank) || rank < 0) {
      return FlagError(where,
                       absl::StrCat("'", part, "' must be LOCAL_RANK:STREAMS, e.g. 0:1,1:2"));
    }
    ASSIGN_OR_RETURN(int m, mask(kv[1]));
    if (!sel.by_rank.emplace(rank, m).second) {
      return FlagError(where, absl::StrCat("local rank ", rank, " is given twice in '", t, "'"));
    }
  }
  return sel;
}

absl::StatusOr<std::string> ParseLogLevel(absl::string_view where, absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lower == "notset") return std::string("trace");
  if (lower == "warn") return std::string("warning");
  if (lower == "err") return std::string("error");
  if (lower == "fatal") return std::string("critical");
  for (const char* level : {"trace", "debug", "info", "warning", "error", "critical", "off"}) {
    if (lower == level) return lower;
  }
  return FlagError(where,
                   absl::StrCat("'", EscapeForMessage(std::string_view(text.data(), text.size())),
                                "' is not a log level; use debug, info, warning, error, "
                                "critical, trace or off"));
}

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  static constexpr std::pair<std::string_view, int> kSuffixes[] = {
      {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  std::string_view digits = text;
  int shift = 0;
  for (const auto& [suffix, bits] : kSuffixes) {
    if (digits.ends_with(suffix)) {
      digits.remove_suffix(suffix.size());
      shift = bits;
    }
  }
  uint64_t n = 0;
  if (digits.empty() || !absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &n) ||
      n == 0 || n > (UINT64_MAX >> shift)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "needs a size in bytes > 0 (1073741824, 512MiB, 2GiB), got '", std::string(text), "'"));
  }
  return n << shift;
}

absl::StatusOr<int> ParsePreemptSignal(std::string_view text) {
  std::string t(absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size())));
  if (absl::AsciiStrToLower(t) == "none") return 0;
  absl::StatusOr<int> sig = ParseSignal(t);
  if (!sig.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", t, "' is not a signal; give a name or number such as SIGUSR1, or none"));
  }
  if (*sig == SIGKILL || *sig == SIGSTOP || *sig == SIGCHLD) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", t, "' cannot be caught by a worker; give one it can handle, such as SIGUSR1"));
  }
  return *sig;
}

}  // namespace muster
