// Subcommand: what every `muster` subcommand (run, serve, status, exec) does before its
// own work. `-h`/`--help` before the command prints its help (usage, flag table, epilogue)
// and exits 0; the words are split into flags and the rest by its flag table; a usage
// error prints "muster NAME: <message>" on stderr and exits 2 (exit_code::kUsage).
// Thread-safe (constant data; the functions write to stdout/stderr).
#ifndef MUSTER_AGENT_SUBCOMMAND_H_
#define MUSTER_AGENT_SUBCOMMAND_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "agent/config/flag_table.h"

namespace muster {

struct Subcommand {
  std::string_view name;   // "serve"
  std::string_view usage;  // --help's text before the flag table
  absl::Span<const FlagSpec> flags;
  std::string_view epilogue = "";  // --help's text after the flag table
};

// usage + the grouped flag table + epilogue.
std::string SubcommandHelp(const Subcommand& command);

// The same as Markdown, for docs/reference/flags.md: a "## muster NAME" section with the
// usage and epilogue as text blocks and the flag table as Markdown tables.
std::string SubcommandMarkdown(const Subcommand& command);

// The preamble: returns the subcommand's flags resolved against `env` (which must outlive
// them), or nullopt after printing the help (*exit_code 0) or a usage error (*exit_code 2).
std::optional<FlagValues> StartSubcommand(const Subcommand& command,
                                          const std::vector<std::string>& args,
                                          const std::map<std::string, std::string>& env,
                                          int* exit_code);

// Prints "muster NAME: <message>" to stderr; returns exit_code::kUsage.
int UsageError(const Subcommand& command, absl::string_view message);

}  // namespace muster

#endif  // MUSTER_AGENT_SUBCOMMAND_H_
