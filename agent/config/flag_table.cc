#include "agent/config/flag_table.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "agent/config/flag_parsers.h"
#include "base/closest_name.h"

namespace muster {
namespace {

// Each group once, in the order groups first appear in the table.
std::vector<std::string_view> Groups(absl::Span<const FlagSpec> specs) {
  std::vector<std::string_view> groups;
  for (const FlagSpec& f : specs) {
    if (std::find(groups.begin(), groups.end(), f.group) == groups.end()) {
      groups.push_back(f.group);
    }
  }
  return groups;
}

// Text in a Markdown table cell: a '|' would end the cell.
std::string MarkdownCell(std::string_view text) {
  return absl::StrReplaceAll(absl::string_view(text.data(), text.size()), {{"|", "\\|"}});
}

const FlagSpec* FindFlag(std::string_view word, absl::Span<const FlagSpec> specs) {
  for (const FlagSpec& f : specs) {
    std::string dash = absl::StrCat("--", f.name);
    std::string under = absl::StrReplaceAll(dash, {{"-", "_"}});
    under.replace(0, 2, "--");
    if (word == dash || word == under) return &f;
    if (f.short_name != 0 && word.size() == 2 && word[0] == '-' && word[1] == f.short_name) {
      return &f;
    }
  }
  return nullptr;
}

// "unknown flag; did you mean --nproc-per-node? see `muster run --help`".
absl::Status UnknownFlag(const std::string& word, absl::Span<const FlagSpec> specs,
                         std::string_view subcommand) {
  std::string guess;
  if (word.rfind("--", 0) == 0) {
    std::vector<std::string> names;
    for (const FlagSpec& f : specs) names.emplace_back(f.name);
    guess = ClosestName(absl::StrReplaceAll(word.substr(2), {{"_", "-"}}), names);
  }
  return FlagError(
      word, absl::StrCat("unknown flag; ",
                         guess.empty() ? "" : absl::StrCat("did you mean --", guess, "? "), "see `",
                         absl::string_view(subcommand.data(), subcommand.size()), " --help`"));
}

}  // namespace

namespace {

// argparse's other spellings of a flag, which torchrun's command lines use: a short flag with
// its value attached (-r3, -r=3), and a long name cut short where no other flag starts the
// same way (--nproc for --nproc-per-node; both spellings of one flag are one flag). Rewrites
// *word to the flag's own spelling and, for an attached value, sets *value and *has_value.
// A prefix that several flags share is an error naming them; any other word (a switch with
// text attached too) stays as it is.
absl::Status ResolveArgparseForm(absl::Span<const FlagSpec> specs, std::string* word,
                                 std::string* value, bool* has_value) {
  std::string_view w = *word;
  if (w.size() <= 2 || FindFlag(w, specs) != nullptr) return absl::OkStatus();
  if (w[1] != '-') {
    const FlagSpec* f = FindFlag(w.substr(0, 2), specs);
    if (f == nullptr || !f->takes_value) return absl::OkStatus();  // -mX: an unknown flag
    std::string_view attached = w.substr(w[2] == '=' ? 3 : 2);
    *value = std::string(attached);
    *has_value = true;
    word->resize(2);
    return absl::OkStatus();
  }
  std::string prefix = absl::StrReplaceAll(std::string(w.substr(2)), {{"_", "-"}});
  std::vector<std::string> matches;
  for (const FlagSpec& f : specs) {
    if (std::string_view(f.name).starts_with(prefix)) matches.push_back(f.name);
  }
  if (std::string_view("help").starts_with(prefix)) matches.push_back("help");
  if (matches.size() == 1) *word = absl::StrCat("--", matches[0]);
  if (matches.size() <= 1) return absl::OkStatus();
  std::string names;
  for (size_t i = 0; i < matches.size(); ++i) {
    const char* separator = i == 0 ? "" : i + 1 < matches.size() ? ", " : " or ";
    absl::StrAppend(&names, separator, "--", matches[i]);
  }
  return FlagError(*word,
                   absl::StrCat("is ambiguous: it could be ", names, "; write more of the name"));
}

}  // namespace

absl::StatusOr<SplitArgs> SplitFlags(const std::vector<std::string>& args,
                                     absl::Span<const FlagSpec> specs,
                                     std::string_view subcommand) {
  SplitArgs out;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-' || a == "-") break;
    std::string word = a, value;
    bool has_inline = false;
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      word = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_inline = true;
    }
    if (absl::Status s = ResolveArgparseForm(specs, &word, &value, &has_inline); !s.ok()) {
      return s;
    }
    const FlagSpec* f = FindFlag(word, specs);
    if (f == nullptr) return UnknownFlag(word, specs, subcommand);
    if (f->takes_value) {
      if (!has_inline) {
        if (i + 1 >= args.size()) return FlagError(word, "needs a value");
        value = args[++i];
      }
    } else {
      if (has_inline) return FlagError(word, "is a switch and takes no value");
      value = "1";
    }
    out.given[f->name] = value;
  }
  out.rest.assign(args.begin() + i, args.end());
  return out;
}

bool HelpRequested(const std::vector<std::string>& args, absl::Span<const FlagSpec> specs) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") return true;
    if (a == "--" || a.empty() || a[0] != '-') return false;  // the command starts here
    size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    std::string word = a.substr(0, eq), value;
    bool has_value = eq != std::string::npos;
    if (!ResolveArgparseForm(specs, &word, &value, &has_value).ok()) return false;
    if (word == "--help") return true;
    const FlagSpec* f = FindFlag(word, specs);
    if (f != nullptr && f->takes_value && !has_value) ++i;  // its value
  }
  return false;
}

// A flag without a default text gets no "(default: )".
std::string FlagHelp(absl::Span<const FlagSpec> specs) {
  std::string out;
  for (std::string_view group : Groups(specs)) {
    absl::StrAppend(&out, "\n", std::string(group), ":\n");
    for (const FlagSpec& f : specs) {
      if (f.group != group) continue;
      std::string names = f.short_name
                              ? absl::StrCat("-", std::string(1, f.short_name), ", --", f.name)
                              : absl::StrCat("    --", f.name);
      if (f.takes_value) absl::StrAppend(&names, " V");
      absl::StrAppend(
          &out, "  ", names, std::string(names.size() < 30 ? 30 - names.size() : 1, ' '), f.help,
          *f.default_text ? absl::StrCat(" (default: ", f.default_text, ")") : "", "\n");
    }
  }
  return out;
}

std::string FlagMarkdown(absl::Span<const FlagSpec> specs) {
  std::string out;
  for (std::string_view group : Groups(specs)) {
    absl::StrAppend(&out, "\n### ", std::string(group),
                    "\n\n| flag | default | meaning |\n|---|---|---|\n");
    for (const FlagSpec& f : specs) {
      if (f.group != group) continue;
      std::string names = absl::StrCat("`--", f.name, f.takes_value ? " V" : "", "`");
      if (f.short_name != 0) names = absl::StrCat("`-", std::string(1, f.short_name), "`, ", names);
      absl::StrAppend(&out, "| ", names, " | ", MarkdownCell(f.default_text), " | ",
                      MarkdownCell(f.help), " |\n");
    }
  }
  return out;
}

std::optional<FlagValue> FlagValues::Get(const char* name) const {
  auto g = args_.given.find(name);
  if (g != args_.given.end()) {
    return FlagValue{.text = g->second, .where = absl::StrCat("--", name)};
  }
  std::string suffix = absl::AsciiStrToUpper(absl::StrReplaceAll(name, {{"-", "_"}}));
  for (const char* prefix : {"MUSTER_", "PET_"}) {
    std::string var = absl::StrCat(prefix, suffix);
    auto e = env_.find(var);
    if (e != env_.end()) return FlagValue{.text = e->second, .where = var};
  }
  return std::nullopt;
}

std::string FlagValues::TextOr(const char* name, std::string fallback) const {
  std::optional<FlagValue> value = Get(name);
  return value ? value->text : fallback;
}

}  // namespace muster
