// The subcommands besides `run`: `muster serve` (a standalone rendezvous server) and
// `muster status` (a job's status from the rendezvous server); `muster exec` is in
// debug_mode.h. Each starts with the shared preamble (subcommand.h) and returns the process
// exit code; flag errors print a message naming the flag and return 2.
#ifndef MUSTER_AGENT_SUBCOMMANDS_H_
#define MUSTER_AGENT_SUBCOMMANDS_H_

#include <map>
#include <string>
#include <vector>

namespace muster {

struct Subcommand;

int ServeCommand(const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env);
int StatusCommand(const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env);
// `muster stacks`: every rank's Python stack, grouped (agent/cli/stacks_command.cc).
int StacksCommand(const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env);
// `muster drain`: preempt one node of a job (agent/cli/drain_command.cc).
int DrainCommand(const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env);

// Each subcommand's usage and flag table (for docs/reference/flags.md).
const Subcommand& ServeSubcommand();
const Subcommand& StatusSubcommand();
const Subcommand& StacksSubcommand();
const Subcommand& DrainSubcommand();

}  // namespace muster

#endif  // MUSTER_AGENT_SUBCOMMANDS_H_
