// Hang detection's flags (docs/guides/hangs-and-stacks.md "Hangs"): --hang-timeout DURATION (off by
// default),
// --hang-action restart|fail, the same as --rdzv-conf keys hang_timeout/hang_action, and the
// check that the rendezvous backend can carry the job-wide rule. Also the stragglers' flags
// (docs/guides/hangs-and-stacks.md "Stragglers"): --straggler-window DURATION (off by default),
// --straggler-interval DURATION, --straggler-share FRACTION.
#ifndef MUSTER_AGENT_HANG_FLAGS_H_
#define MUSTER_AGENT_HANG_FLAGS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "agent/config/config.h"
#include "agent/config/flag_table.h"

namespace muster {

// Below this a stall cannot be told from a pause (and sampling would cost).
inline constexpr absl::Duration kMinHangTimeout = absl::Seconds(1);

absl::Status ApplyHangTimeout(const FlagValue& value, Config* config);
absl::Status ApplyHangAction(const FlagValue& value, Config* config);

// Stragglers: the sample interval's floor (a stack dump costs each worker about a
// millisecond of CPU), and the window's at least two samples.
inline constexpr absl::Duration kMinStragglerInterval = absl::Milliseconds(100);
absl::Status ApplyStragglerWindow(const FlagValue& value, Config* config);
absl::Status ApplyStragglerInterval(const FlagValue& value, Config* config);
absl::Status ApplyStragglerShare(const FlagValue& value, Config* config);

// --rdzv-conf's hang_timeout and hang_action; nullopt for any other key.
std::optional<absl::Status> ApplyHangRdzvConfKey(const std::string& where, const std::string& key,
                                                 const std::string& value, Config* config);

}  // namespace muster

#endif  // MUSTER_AGENT_HANG_FLAGS_H_
