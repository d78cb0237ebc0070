#include "launch/line_splitter.h"

namespace muster {

void LineSplitter::Feed(std::string_view data, absl::Time now, const Emit& emit) {
  while (!data.empty()) {
    size_t end = data.find_first_of("\r\n");
    size_t take = end == std::string_view::npos ? data.size() : end;
    if (partial_.size() + take >= max_line_) {
      // Too long for one line: emit what fits and keep going with the rest.
      size_t room = max_line_ - partial_.size();
      partial_.append(data.substr(0, room));
      EmitPartial(emit);
      data.remove_prefix(room);
      continue;
    }
    if (end == std::string_view::npos) {
      if (partial_.empty()) partial_since_ = now;
      partial_.append(data);
      return;
    }
    EndLine(data.substr(0, end), data[end], emit);
    data.remove_prefix(end + 1);
  }
}

void LineSplitter::EndLine(std::string_view rest, char terminator, const Emit& emit) {
  if (partial_.empty() && rest.empty()) {
    // Nothing since the last line end: a '\r' shows nothing and changes nothing; a '\n'
    // is a blank line unless the display already ended the line ("\r\n" is one end).
    if (terminator == '\r') return;
    if (!line_shown_) emit(rest);
  } else if (partial_.empty()) {
    emit(rest);
  } else {
    partial_.append(rest);
    emit(partial_);
    partial_.clear();
    partial_since_ = absl::InfiniteFuture();
  }
  line_shown_ = terminator == '\r';
}

void LineSplitter::EmitPartial(const Emit& emit) {
  emit(partial_);
  partial_.clear();
  partial_since_ = absl::InfiniteFuture();
  line_shown_ = true;
}

absl::Time LineSplitter::flush_deadline() const {
  return partial_.empty() ? absl::InfiniteFuture() : partial_since_ + partial_delay_;
}

void LineSplitter::FlushDueAt(absl::Time now, const Emit& emit) {
  if (!partial_.empty() && flush_deadline() <= now) EmitPartial(emit);
}

void LineSplitter::Finish(const Emit& emit) {
  if (!partial_.empty()) emit(partial_);
  partial_.clear();
  partial_since_ = absl::InfiniteFuture();
  line_shown_ = false;
}

}  // namespace muster
