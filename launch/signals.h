// Synchronous signal handling: signals are blocked at start and read from a
// signalfd in the event loop (tini's model: no logic in asynchronous handlers).
#ifndef MUSTER_LAUNCH_SIGNALS_H_
#define MUSTER_LAUNCH_SIGNALS_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/unique_fd.h"

namespace muster {

// "SIGTERM,SIGINT,SIGHUP,SIGQUIT" (torchrun's default and spelling; names or
// numbers). "" is no signal; an empty entry is an error. The error does not name the flag:
// the caller knows where the text came from.
absl::StatusOr<std::vector<int>> ParseSignalList(std::string_view text);

// Blocks `handled` plus SIGCHLD in the calling thread, ignores SIGPIPE (a
// closed console must not kill the agent), and returns a non-blocking signalfd
// for exactly that set. Call from main before any thread starts, so every later
// thread inherits the mask.
absl::StatusOr<UniqueFd> BlockAndOpenSignalFd(const std::vector<int>& handled);

}  // namespace muster

#endif  // MUSTER_LAUNCH_SIGNALS_H_
