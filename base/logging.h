// Process-wide logging setup (spdlog). Agent log lines go to stderr with a
// "[muster]" tag so they never mix with worker output prefixes ("[default0]:").
#ifndef MUSTER_BASE_LOGGING_H_
#define MUSTER_BASE_LOGGING_H_

#include <string_view>

namespace muster {

// `level` is one of trace, debug, info, warn, error (LOGLEVEL /
// MUSTER_LOG_LEVEL). Unknown levels fall back to info. Call once, from main,
// before any thread starts.
void InitLogging(std::string_view level);

}  // namespace muster

#endif  // MUSTER_BASE_LOGGING_H_
