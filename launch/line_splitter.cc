#include "launch/line_splitter.h"

namespace muster {

void LineSplitter::Feed(std::string_view data, const Emit& emit) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    size_t take = nl == std::string_view::npos ? data.size() : nl;
    if (partial_.size() + take >= max_line_) {
      // Too long for one line: emit what fits and keep going with the rest.
      size_t room = max_line_ - partial_.size();
      partial_.append(data.substr(0, room));
      emit(partial_);
      partial_.clear();
      data.remove_prefix(room);
      continue;
    }
    if (nl == std::string_view::npos) {
      partial_.append(data);
      return;
    }
    if (partial_.empty()) {
      emit(data.substr(0, nl));
    } else {
      partial_.append(data.substr(0, nl));
      emit(partial_);
      partial_.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::Finish(const Emit& emit) {
  if (!partial_.empty()) emit(partial_);
  partial_.clear();
}

}  // namespace muster
