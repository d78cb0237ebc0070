// The agent's own log lines through the ConsoleWriter: an spdlog sink that formats a
// line and queues it on a ConsoleWriter source for stderr that drops when full
// (ConsoleWriter::WhenFull::kDrop). Logging from the event loop (or a gRPC thread) then
// never waits for the console: a stuck console loses log lines, counted and reported
// once it moves again, and signals, child exits and rendezvous events are handled on
// time. The same writer thread writes the workers' lines, so an agent line is never
// spliced into a worker's.
//
// Thread-safe (spdlog's base_sink mutex, then the writer's).
#ifndef MUSTER_LAUNCH_CONSOLE_LOG_SINK_H_
#define MUSTER_LAUNCH_CONSOLE_LOG_SINK_H_

#include <memory>

#include "absl/time/time.h"
#include "launch/console_writer.h"

namespace muster {

// Moves the default logger onto `console` (base/logging.h's SetLogSink; same rules).
void LogThroughConsole(std::shared_ptr<ConsoleWriter> console);

// For the agent's exit: waits at most `timeout` for the queued log lines to be written,
// less when the console is stalled. Once they are out, the writer thread ends and later
// lines are written directly (synchronously), as before LogThroughConsole. On a stalled
// console nothing changes: lines are queued or dropped, lost unless the console moves
// before the process exits, and the thread ends with the process. True when nothing is
// left. A no-op (true) unless LogThroughConsole ran.
// Call after the agent dropped its other references to the console writer.
bool FlushConsoleLog(absl::Duration timeout);

}  // namespace muster

#endif  // MUSTER_LAUNCH_CONSOLE_LOG_SINK_H_
