#include "base/closest_name.h"

#include <algorithm>
#include <limits>

namespace muster {

int EditDistance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: the one before last (for a swap), last, this one.
  std::vector<int> before(b.size() + 1), last(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) last[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int substitute = last[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({last[j] + 1, row[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[j] = std::min(row[j], before[j - 2] + 1);
      }
    }
    std::swap(before, last);
    std::swap(last, row);
  }
  return last[b.size()];
}

std::string ClosestName(std::string_view word, const std::vector<std::string>& candidates) {
  int limit = std::clamp(static_cast<int>(word.size()) / 3, 1, 3);
  int best = std::numeric_limits<int>::max();
  const std::string* closest = nullptr;
  for (const std::string& c : candidates) {
    int d = EditDistance(word, c);
    if (d <= limit && d < best) {
      best = d;
      closest = &c;
    }
  }
  return closest != nullptr ? *closest : "";
}

}  // namespace muster
