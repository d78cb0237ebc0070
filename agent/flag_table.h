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
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace muster {

struct FlagSpec {
  const char* name;  // dash spelling without "--"
  char short_name;   // 0: none
  bool takes_value;
  const char* group;
  const char* default_text;
  const char* help;
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

// Resolves a flag: its value and where it came from ("--nnodes", "MUSTER_NNODES",
// "PET_NNODES"), or nullopt when unset everywhere.
class FlagValues {
 public:
  FlagValues(SplitArgs args, const std::map<std::string, std::string>& env)
      : args_(std::move(args)), env_(env) {}
  std::optional<std::pair<std::string, std::string>> Get(const char* name) const;
  const std::vector<std::string>& rest() const { return args_.rest; }

 private:
  SplitArgs args_;
  const std::map<std::string, std::string>& env_;
};

// The job's shared secret: the contents of the --token-file value `token_file` (trailing
// whitespace dropped; unreadable or empty is InvalidArgument naming where it came from),
// else MUSTER_TOKEN, else "". Never logged.
absl::StatusOr<std::string> ResolveToken(
    const std::optional<std::pair<std::string, std::string>>& token_file,
    const std::map<std::string, std::string>& env);

}  // namespace muster

#endif  // MUSTER_AGENT_FLAG_TABLE_H_
