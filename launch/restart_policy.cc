#include "launch/restart_policy.h"

#include <signal.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/exit_codes.h"

namespace muster {

absl::StatusOr<RestartPolicy> ParseRestartPolicy(std::string_view text) {
  std::string lower = absl::AsciiStrToLower(absl::string_view(text.data(), text.size()));
  if (lower == "never") return RestartPolicy::kNever;
  if (lower == "onfailure") return RestartPolicy::kOnFailure;
  if (lower == "always") return RestartPolicy::kAlways;
  if (lower == "exitcode") return RestartPolicy::kExitCode;
  return absl::InvalidArgumentError(
      absl::StrCat("--restart-policy: '", absl::string_view(text.data(), text.size()),
                   "' is not a policy; use Never, OnFailure, Always or ExitCode"));
}

const char* RestartPolicyName(RestartPolicy policy) {
  switch (policy) {
    case RestartPolicy::kNever:
      return "Never";
    case RestartPolicy::kOnFailure:
      return "OnFailure";
    case RestartPolicy::kAlways:
      return "Always";
    case RestartPolicy::kExitCode:
      return "ExitCode";
  }
  return "?";
}

std::set<int> DefaultRestartableExitCodes() {
  // SIGINT, SIGKILL (the OOM killer, a preemption), SIGTERM, and 138: a signal number's
  // 128+N, and the agents' own transient code (seeds/000).
  return {exit_code::ForSignal(SIGINT), exit_code::ForSignal(SIGKILL), exit_code::kTransient,
          exit_code::ForSignal(SIGTERM)};
}

absl::StatusOr<std::set<int>> ParseExitCodeList(std::string_view text) {
  std::set<int> codes;
  absl::string_view t = absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (t.empty()) return codes;  // no code restarts
  for (absl::string_view part : absl::StrSplit(t, ',')) {
    int code = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &code) || code < 1 || code > 255) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", part,
                       "' is not an exit code; give a comma-separated list of "
                       "codes 1..255, e.g. 130,137,143,138"));
    }
    codes.insert(code);
  }
  return codes;
}

absl::StatusOr<int> ParseFatalExitCode(std::string_view text) {
  int code = 0;
  absl::string_view t = absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (!absl::SimpleAtoi(t, &code) || code < 1 || code > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", t, "' is not an exit code; give one code 1..125, e.g. 93"));
  }
  if (code == exit_code::kUsage || code == exit_code::kNotExecutable ||
      code == exit_code::kNotFound || code >= 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        code,
        " already means something to a scheduler or a shell (2: bad flags, 126/127: "
        "command not executable/found, 128+N: killed by signal N, 138: transient); give "
        "a code 1..125 other than 2 that your scheduler's requeue rule names, e.g. 93"));
  }
  return code;
}

const char* ExitVerdictName(ExitVerdict verdict) {
  switch (verdict) {
    case ExitVerdict::kSucceeded:
      return "succeeded";
    case ExitVerdict::kRestartable:
      return "restartable";
    case ExitVerdict::kFatal:
      return "fatal";
  }
  return "?";
}

ExitVerdict ClassifyExit(RestartPolicy policy, const std::set<int>& restartable, int code) {
  switch (policy) {
    case RestartPolicy::kAlways:
    case RestartPolicy::kOnFailure:
      return code == 0 ? ExitVerdict::kSucceeded : ExitVerdict::kRestartable;
    case RestartPolicy::kNever:
      return code == 0 ? ExitVerdict::kSucceeded : ExitVerdict::kFatal;
    case RestartPolicy::kExitCode:
      if (code == 0) return ExitVerdict::kSucceeded;
      return restartable.count(code) ? ExitVerdict::kRestartable : ExitVerdict::kFatal;
  }
  return ExitVerdict::kFatal;
}

}  // namespace muster
