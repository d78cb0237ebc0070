// FlagTable: the command-line conventions every muster subcommand shares. Flags follow
// torchrun's names in dash and underscore spellings (`--nproc-per-node`,
// `--nproc_per_node`), `--flag value` or `--flag=value`, switches without a value; the
// first word that is not a flag (or the word after "--") starts the command, and the rest
// belongs to it. Values resolve as flag > MUSTER_<FLAG> > PET_<FLAG> > default.
// Thread-safe (no state besides what the caller passes).
#ifndef MUSTER_AGENT_FLAG_TABLE_H_
#define MUSTER_AGENT_FLAG_TABLE_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace muster {

struct Config;

// One resolved flag: its text and where it came from ("--nnodes", "MUSTER_NNODES",
// "PET_NNODES"), which every error about it names.
struct FlagValue {
  std::string text;
  std::string where;
};

struct FlagSpec {
  const char* name;          // dash spelling without "--"
  char short_name = 0;       // 0: none
  bool takes_value = true;   // false: a switch
  const char* group;         // --help's heading
  const char* default_text;  // --help's "(default: ...)"
  const char* help;
  // `muster run`'s flags: sets the value into Config (InvalidArgument naming value.where
  // when it is not one). The other subcommands' flags have none: they read their few
  // values themselves.
  absl::Status (*apply)(const FlagValue& value, Config* config) = nullptr;
};

// What a command line gave, before environment and defaults.
struct SplitArgs {
  std::map<std::string, std::string> given;  // flag name -> value ("1" for switches)
  std::vector<std::string> rest;             // the command and its arguments
};

// `subcommand` names the help to point at in errors ("muster run").
absl::StatusOr<SplitArgs> SplitFlags(const std::vector<std::string>& args,
                                     absl::Span<const FlagSpec> specs, std::string_view subcommand);

// True when args ask for help (-h/--help before the command).
bool HelpRequested(const std::vector<std::string>& args, absl::Span<const FlagSpec> specs);

// The grouped flag table with defaults, for --help.
std::string FlagHelp(absl::Span<const FlagSpec> specs);

// The same table as Markdown, for docs/reference/flags.md: per group a "### group" heading
// and a table of flag, default and meaning, in the order of FlagHelp.
std::string FlagMarkdown(absl::Span<const FlagSpec> specs);

// A subcommand's flags resolved against the environment. Holds a reference to `env`,
// which must outlive it.
class FlagValues {
 public:
  FlagValues(SplitArgs args, const std::map<std::string, std::string>& env)
      : args_(std::move(args)), env_(env) {}
  // The flag's value (command line, else MUSTER_<FLAG>, else PET_<FLAG>), or nullopt when
  // unset everywhere.
  std::optional<FlagValue> Get(const char* name) const;
  // Get(name)'s text, or `fallback` when unset.
  std::string TextOr(const char* name, std::string fallback) const;
  const std::vector<std::string>& rest() const { return args_.rest; }
  const std::map<std::string, std::string>& env() const { return env_; }

 private:
  SplitArgs args_;
  const std::map<std::string, std::string>& env_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_FLAG_TABLE_H_
