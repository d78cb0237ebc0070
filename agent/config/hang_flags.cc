#include "agent/config/hang_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/config/flag_parsers.h"
#include "base/duration.h"
#include "base/wire_values.h"

namespace muster {

absl::Status ApplyHangTimeout(const FlagValue& v, Config* c) {
  absl::StatusOr<absl::Duration> d = ParseDuration(v.text);
  if (!d.ok()) return FlagError(v.where, d.status().message());
  if (*d != absl::ZeroDuration() && *d < kMinHangTimeout) {
    return FlagError(v.where, absl::StrCat("'", EscapeForMessage(v.text), "' is below ",
                                           HumanDuration(kMinHangTimeout),
                                           "; use 0 (off) or a duration of at least 1s"));
  }
  c->hang_timeout = *d;
  c->sources["hang-timeout"] = v.where;
  return absl::OkStatus();
}

absl::Status ApplyHangAction(const FlagValue& v, Config* c) {
  if (v.text != "restart" && v.text != "fail") {
    return FlagError(v.where, absl::StrCat("'", EscapeForMessage(v.text),
                                           "' must be restart (the restart budget applies) "
                                           "or fail"));
  }
  c->hang_restart = v.text == "restart";
  return absl::OkStatus();
}

absl::Status ApplyStragglerWindow(const FlagValue& v, Config* c) {
  absl::StatusOr<absl::Duration> d = ParseDuration(v.text);
  if (!d.ok()) return FlagError(v.where, d.status().message());
  if (*d < absl::ZeroDuration()) return FlagError(v.where, "must be 0 (off) or a duration");
  c->straggler_window = *d;
  return absl::OkStatus();
}

absl::Status ApplyStragglerInterval(const FlagValue& v, Config* c) {
  absl::StatusOr<absl::Duration> d = ParseDuration(v.text);
  if (!d.ok()) return FlagError(v.where, d.status().message());
  if (*d < kMinStragglerInterval) {
    return FlagError(v.where, absl::StrCat("'", EscapeForMessage(v.text), "' is below ",
                                           HumanDuration(kMinStragglerInterval)));
  }
  c->straggler_interval = *d;
  return absl::OkStatus();
}

absl::Status ApplyStragglerShare(const FlagValue& v, Config* c) {
  double share = 0;
  if (!absl::SimpleAtod(v.text, &share) || !(share > 0 && share <= 1)) {
    return FlagError(v.where, absl::StrCat("'", EscapeForMessage(v.text),
                                           "' must be a fraction above 0, at most 1 (0.3: "
                                           "30 % of the window's samples)"));
  }
  c->straggler_share = share;
  return absl::OkStatus();
}

std::optional<absl::Status> ApplyHangRdzvConfKey(const std::string& where, const std::string& key,
                                                 const std::string& value, Config* c) {
  FlagValue v{.text = value, .where = absl::StrCat(where, " ", key)};
  if (key == "hang_timeout") return ApplyHangTimeout(v, c);
  if (key == "hang_action") return ApplyHangAction(v, c);
  return std::nullopt;
}

}  // namespace muster
