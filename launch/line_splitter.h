// LineSplitter: turns a byte stream into the lines a console shows, so worker output is
// never spliced mid-line with a sibling's. A line ends at '\n' or at '\r' (a progress
// bar's update is shown as it comes). A line longer than `max_line` is cut into pieces of
// that size (memory stays bounded even for output without newlines), and a partial line
// that has waited `partial_delay` is shown on its own (FlushDueAt): the rest of it becomes
// a continuation line. No blank line is made where the display already ended the line
// ("\r\n", the '\n' after a cut or a flushed partial). Not thread-safe.
#ifndef MUSTER_LAUNCH_LINE_SPLITTER_H_
#define MUSTER_LAUNCH_LINE_SPLITTER_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace muster {

class LineSplitter {
 public:
  // `emit` receives each line without its terminator.
  using Emit = std::function<void(std::string_view line)>;

  explicit LineSplitter(size_t max_line = 64 * 1024,
                        absl::Duration partial_delay = absl::Milliseconds(200))
      : max_line_(max_line), partial_delay_(partial_delay) {}

  // `now` (any monotonic clock) starts the partial line's wait when `data` begins one.
  void Feed(std::string_view data, absl::Time now, const Emit& emit);
  // When the pending partial line is due to be shown; InfiniteFuture() when there is none.
  absl::Time flush_deadline() const;
  // Shows the pending partial line if its deadline is at or before `now`.
  void FlushDueAt(absl::Time now, const Emit& emit);
  // End of stream: emits a trailing partial line, if any.
  void Finish(const Emit& emit);

 private:
  // Ends the current line at a terminator ('\n' or '\r') after `rest` more bytes.
  void EndLine(std::string_view rest, char terminator, const Emit& emit);
  void EmitPartial(const Emit& emit);

  const size_t max_line_;
  const absl::Duration partial_delay_;
  std::string partial_;
  absl::Time partial_since_ = absl::InfiniteFuture();
  // The display already ended the current line (a '\r', a cut, a flushed partial): a
  // '\n' with nothing before it closes that line instead of showing a blank one.
  bool line_shown_ = false;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_LINE_SPLITTER_H_
