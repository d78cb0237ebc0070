// ConsoleWriter: the one thread that writes to the agent's stdout and stderr, so a
// slow or stuck console (a full pipe nobody reads, a stopped terminal, a hung log
// collector) never blocks the agent's event loop: the loop only queues.
//
// Sources: every worker stream is one source, and so are the agent's own log lines
// (launch/console_log_sink.h). Each has its own queue, bounded by `source_limit`
// bytes; the writer takes one batch from each non-empty queue in turn, so a worker
// flooding its output cannot delay a sibling's (or the agent's) lines by more than one
// batch. Text is queued and written in whole lines, and only this thread writes, so
// lines of different sources are never spliced, whatever the console does.
//
// When a queue is full:
//  - kPushBack (worker streams): Push() says so; the caller stops reading that worker's
//    pipe (the worker blocks in write, as on a slow terminal) until the writer signals
//    space on space_fd() (an eventfd). A console that is slow but moving loses nothing.
//  - kDrop (the agent's log): the text is dropped and counted; the loop never waits.
//  - Once the console is stalled (a write has made no progress for `stall_after`), worker
//    streams drop too: HasSpace() is true, and the caller resumes reading, so a stuck log
//    collector neither freezes the training nor keeps a worker from reaching its exit.
// Dropped text is counted in lines and bytes; once a write succeeds again the writer
// prints "[muster] N lines (M bytes) of output dropped while the console was blocked"
// to `summary_fd` (stderr), once per blocked spell.
//
// Writes go out in chunks of at most 16 KiB, so a console read at 16 KiB/s or faster
// never counts as stalled. Memory is bounded by sources × (limit + one read chunk).
// At exit Drain() waits with a deadline and gives up at once on a stalled console; the
// destructor joins the writer thread once everything is written, and never waits for a
// stuck write: the writer's state is shared with its thread, which is then detached and
// ends with the process.
//
// Thread-safe: Push/HasSpace/AddSource/Drain from any thread (the loop's, and spdlog's
// callers for the log source); writing on the writer thread.
#ifndef MUSTER_LAUNCH_CONSOLE_WRITER_H_
#define MUSTER_LAUNCH_CONSOLE_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace muster {

class ConsoleWriter {
 public:
  enum class WhenFull { kPushBack, kDrop };
  struct Options {
    size_t source_limit = 1 << 20;
    absl::Duration stall_after = absl::Seconds(1);
    int summary_fd = 2;
  };
  struct Dropped {
    uint64_t lines = 0, bytes = 0;
  };

  static absl::StatusOr<std::unique_ptr<ConsoleWriter>> Start(Options options);
  static absl::StatusOr<std::unique_ptr<ConsoleWriter>> Start() { return Start(Options{}); }
  // Close(), then Drain() for at most 1 s; joins the writer thread when that drained it.
  ~ConsoleWriter();

  // A new source writing to `out_fd` (1 or 2). Ids are never reused.
  int AddSource(int out_fd, WhenFull when_full = WhenFull::kPushBack);
  // Queues `text` (whole lines, each ending in '\n'). Returns false when the
  // source's queue is now over its limit: stop feeding it until HasSpace().
  bool Push(int source, std::string text);
  bool HasSpace(int source);
  // True while a write has made no progress for `stall_after`.
  bool Stalled();
  absl::Duration stall_after() const;
  // Readable (eventfd) when a source that was over its limit has drained below
  // half.
  int space_fd() const;
  // Waits until every queue is written (true), `timeout` passes or the console is
  // stalled (false).
  bool Drain(absl::Duration timeout);
  // No more Push(): the writer thread ends once every queue is written.
  void Close();
  // Everything dropped so far, including what the summary line already reported.
  Dropped dropped_total();

  struct State;  // shared with the writer thread, which may outlive this object

 private:
  ConsoleWriter(std::shared_ptr<State> state, std::thread thread)
      : state_(std::move(state)), thread_(std::move(thread)) {}

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_CONSOLE_WRITER_H_
