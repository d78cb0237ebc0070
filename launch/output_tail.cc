#include "launch/output_tail.h"

#include <cstdint>
#include <cstdio>
#include <vector>

#include "base/wire_values.h"

namespace muster {
namespace {

// What a terminal shows of a line that contains '\r': the last piece that is not empty
// ("10%\r20%\r" shows "20%", "a\r" shows "a").
std::string_view AsShown(std::string_view line) {
  while (!line.empty()) {
    size_t cr = line.rfind('\r');
    if (cr == std::string_view::npos) return line;
    if (cr + 1 < line.size()) return line.substr(cr + 1);
    line.remove_suffix(1);
  }
  return line;
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

void AppendEscaped(std::string* out, uint8_t b) {
  char hex[8];
  std::snprintf(hex, sizeof(hex), "\\x%02X", b);
  out->append(hex);
}

// `line` as valid UTF-8 without control characters (a terminal would act on them; the
// text goes into proto3 strings, JSON and the termination log).
std::string Printable(std::string_view line) {
  std::string valid = ToValidUtf8(line);
  std::string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size(); ++i) {
    auto b = static_cast<uint8_t>(valid[i]);
    bool c1 = b == 0xC2 && i + 1 < valid.size() && static_cast<uint8_t>(valid[i + 1]) >= 0x80 &&
              static_cast<uint8_t>(valid[i + 1]) <= 0x9F;  // U+0080..U+009F
    if ((b < 0x20 && b != '\t') || b == 0x7F) {
      AppendEscaped(&out, b);
    } else if (c1) {
      AppendEscaped(&out, b);
      AppendEscaped(&out, static_cast<uint8_t>(valid[++i]));
    } else {
      out.push_back(valid[i]);
    }
  }
  return out;
}

// "..." and the end of `line` in at most `max` bytes, starting on a character boundary.
std::string EndOf(const std::string& line, size_t max) {
  size_t from = line.size() + 3 > max ? line.size() + 3 - max : 0;
  while (from < line.size() && (static_cast<uint8_t>(line[from]) & 0xC0) == 0x80) ++from;
  return "..." + line.substr(from);
}

}  // namespace

void OutputTail::Append(std::string_view data) {
  if (data.size() >= kMaxBytes) {
    size_t drop = data.size() - kMaxBytes;
    head_cut_ = drop > 0 ? data[drop - 1] != '\n' : !buf_.empty() && buf_.back() != '\n';
    buf_.assign(data.substr(drop));
    return;
  }
  buf_.append(data);
  if (buf_.size() <= kMaxBytes) return;
  size_t drop = buf_.size() - kMaxBytes;
  head_cut_ = buf_[drop - 1] != '\n';
  buf_.erase(0, drop);
}

std::vector<std::string_view> OutputTail::Lines(bool* cut) const {
  std::vector<std::string_view> lines;
  std::string_view rest = buf_;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    lines.push_back(AsShown(rest.substr(0, nl)));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  }
  while (!lines.empty() && IsBlank(lines.back())) lines.pop_back();
  *cut = head_cut_;
  if (*cut && lines.size() > 1) {
    lines.erase(lines.begin());  // its start is gone; the lines after it are whole
    *cut = false;
  }
  return lines;
}

std::string OutputTail::Text() const {
  bool cut = false;
  std::vector<std::string_view> lines = Lines(&cut);
  if (lines.empty()) return "";
  size_t first = lines.size() > kMaxLines ? lines.size() - kMaxLines : 0;
  std::vector<std::string> shown;
  for (size_t i = first; i < lines.size(); ++i) shown.push_back(Printable(lines[i]));
  if (cut || shown.back().size() > kMaxBytes) return EndOf(shown.back(), kMaxBytes);
  // Whole lines from the end while they fit (escapes can make the text longer than buf_).
  size_t begin = shown.size() - 1, bytes = shown.back().size();
  while (begin > 0 && bytes + 1 + shown[begin - 1].size() <= kMaxBytes) {
    bytes += 1 + shown[--begin].size();
  }
  std::string out;
  out.reserve(bytes);
  for (size_t i = begin; i < shown.size(); ++i) {
    if (i > begin) out.push_back('\n');
    out.append(shown[i]);
  }
  return out;
}

}  // namespace muster
