// The command-line reference, docs/reference/flags.md, generated from the flag tables of
// every subcommand (`muster help --markdown` prints it). The committed file is checked
// against this output by the `flags_reference_doc` test, so the page cannot drift from
// the code: change a flag, then regenerate with
//   build/bin/muster help --markdown > docs/reference/flags.md
#ifndef MUSTER_AGENT_FLAGS_REFERENCE_H_
#define MUSTER_AGENT_FLAGS_REFERENCE_H_

#include <string>

namespace muster {

// `muster`'s own usage: the list of commands.
const char* CommandsUsage();

// docs/reference/flags.md: the commands, then each subcommand's usage and flag tables.
std::string FlagsReferenceMarkdown();

}  // namespace muster

#endif  // MUSTER_AGENT_FLAGS_REFERENCE_H_
