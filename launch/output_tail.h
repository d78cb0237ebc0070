// OutputTail: the last bytes a worker wrote to one stream (its stderr), so that its failure
// can name the last lines it printed even where no one saw them (-r sends them to a file
// only; the other nodes never see them). Bounded: the last kMaxBytes bytes are kept,
// whatever the worker writes. Not thread-safe.
#ifndef MUSTER_LAUNCH_OUTPUT_TAIL_H_
#define MUSTER_LAUNCH_OUTPUT_TAIL_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace muster {

class OutputTail {
 public:
  static constexpr size_t kMaxBytes = 4096;
  static constexpr size_t kMaxLines = 20;

  void Append(std::string_view data);

  // The last kMaxLines lines as a terminal shows them (a '\r' starts the line over: a
  // progress bar is its last update), trailing blank lines left out, joined by '\n' without
  // a final one, at most kMaxBytes bytes. Printable text: invalid UTF-8 and control
  // characters other than tab are written as \xNN. A line whose start was dropped (the
  // worker wrote more than kMaxBytes without a newline) begins with "...". "" when the
  // worker wrote nothing but blank lines.
  std::string Text() const;

 private:
  // buf_'s lines as shown, without trailing blank ones nor (when others follow) a first
  // line whose start was dropped; `cut`: the only line left is such a line.
  std::vector<std::string_view> Lines(bool* cut) const;

  std::string buf_;  // at most kMaxBytes
  // Bytes before buf_ were dropped and the last of them was not '\n': buf_'s first line
  // is the end of a longer one.
  bool head_cut_ = false;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_OUTPUT_TAIL_H_
