// Value parsers the flag tables of `muster run` (run_flags.cc, rendezvous_flags.cc) share.
// Each error is InvalidArgument and starts with `where`, the flag or variable the text came
// from. Thread-safe (pure functions).
#ifndef MUSTER_AGENT_FLAG_PARSERS_H_
#define MUSTER_AGENT_FLAG_PARSERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/config/config.h"
#include "agent/config/flag_table.h"

namespace muster {

// InvalidArgument "<where>: <what>".
absl::Status FlagError(absl::string_view where, absl::string_view what);

// A whole number >= 0.
absl::StatusOr<int> ParseNonNegative(absl::string_view where, absl::string_view text);

// A size in bytes: a whole number > 0 with an optional binary suffix (KiB, MiB, GiB, TiB):
// "1073741824", "512MiB", "2GiB".
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// A switch's value: 1/true/yes or 0/false/no/"" (any case).
absl::StatusOr<bool> ParseSwitch(const FlagValue& value);

// torch's RendezvousParameters.get_as_bool, for --rdzv-conf keys: 1/true/t/yes/y or
// 0/false/f/no/n (any case).
std::optional<bool> ParseTorchBool(absl::string_view text);

// torchrun's Std.from_str for -r/-t: one mask for every rank, or LOCAL_RANK:MASK pairs.
absl::StatusOr<StreamSelection> ParseStreams(absl::string_view where, absl::string_view text);

// What --log-level and LOGLEVEL accept: spdlog's level names and Python logging's
// (torchrun passes LOGLEVEL to logging), any case. Returns spdlog's name.
absl::StatusOr<std::string> ParseLogLevel(absl::string_view where, absl::string_view text);

// --preempt-signal: a signal name or number (SIGUSR1, USR1, 10), or "none" (0: the file
// only). InvalidArgument naming the flag otherwise.
absl::StatusOr<int> ParsePreemptSignal(std::string_view text);

// One of a Config mode's spellings (config.h), else "'<text>' must be a, b or c".
template <typename Mode>
absl::StatusOr<Mode> ParseModeFlag(const FlagValue& value) {
  std::optional<Mode> mode = ParseMode<Mode>(value.text);
  if (!mode) return FlagError(value.where, "'" + value.text + "' must be " + ModeNames<Mode>());
  return *mode;
}

}  // namespace muster

#endif  // MUSTER_AGENT_FLAG_PARSERS_H_
