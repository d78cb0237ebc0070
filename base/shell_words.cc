#include "base/shell_words.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace muster {
namespace {

// Characters a word may hold and still read as itself, unquoted, in sh.
bool IsPlain(const std::string& word) {
  if (word.empty()) return false;
  for (char c : word) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 std::string_view("-_./:=,+@%").find(c) != std::string_view::npos;
    if (!plain) return false;
  }
  return true;
}

}  // namespace

std::string ShellQuote(const std::string& text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
}

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    out += IsPlain(w) ? w : ShellQuote(w);
  }
  return out;
}

}  // namespace muster
