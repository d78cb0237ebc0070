// LineSplitter: turns a byte stream into whole lines, so worker output is never
// spliced mid-line with a sibling's. A line longer than `max_line` is cut into
// pieces of that size (memory stays bounded even for output without newlines).
// Not thread-safe.
#ifndef MUSTER_LAUNCH_LINE_SPLITTER_H_
#define MUSTER_LAUNCH_LINE_SPLITTER_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace muster {

class LineSplitter {
 public:
  // `emit` receives each line without its '\n'.
  using Emit = std::function<void(std::string_view line)>;

  explicit LineSplitter(size_t max_line = 64 * 1024) : max_line_(max_line) {}

  void Feed(std::string_view data, const Emit& emit);
  // End of stream: emits a trailing partial line, if any.
  void Finish(const Emit& emit);

 private:
  size_t max_line_;
  std::string partial_;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_LINE_SPLITTER_H_
