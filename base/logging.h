// Process-wide logging setup (spdlog). Agent log lines go to stderr with a
// "[muster]" tag so they never mix with worker output prefixes ("[default0]:").
//
// InitLogging writes each line synchronously (a line is out before the agent can die
// or exec): right for flag errors and setup, which run before the event loop. Once the
// agent's loop runs, a log line must never block it on a stuck console, so the agent
// moves its lines to an asynchronous sink with SetLogSink (launch/console_log_sink.h).
#ifndef MUSTER_BASE_LOGGING_H_
#define MUSTER_BASE_LOGGING_H_

#include <memory>
#include <string_view>

namespace spdlog::sinks {
class sink;
}  // namespace spdlog::sinks

namespace muster {

// `level` is one of trace, debug, info, warn, error (LOGLEVEL /
// MUSTER_LOG_LEVEL). Unknown levels fall back to info. Call once, from main,
// before any thread starts.
void InitLogging(std::string_view level);

// Replaces the default logger's sink with `sink`, formatted as InitLogging's lines.
// Not thread-safe: call before any thread other than the caller logs.
void SetLogSink(std::shared_ptr<spdlog::sinks::sink> sink);

// Names this agent's node in every later line ("[muster 2026-11-29 08:00:00.000 info node 1]
// job succeeded ..."), so that the lines of several agents on one console can be told
// apart; "" drops the tag. Thread-safe (each sink swaps its formatter under its own lock).
void SetLogNodeTag(std::string_view tag);

}  // namespace muster

#endif  // MUSTER_BASE_LOGGING_H_
