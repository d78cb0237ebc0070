// `muster run`'s flags: torchrun's names in dash and underscore spellings, each also
// settable as MUSTER_<FLAG> and (torchrun/Kubeflow) PET_<FLAG>. One table (run_flags.cc)
// lists every flag with its help and its apply step; ParseRunFlags applies each flag that
// is set, then the environment's fallbacks and the checks that span flags. Parsing looks
// at nothing but its arguments: what it needs of the machine comes in HostInfo, and the
// checks against the filesystem come after it (CheckRunConfig, config_check.h). Every
// error names the flag or variable and how to fix it; the caller exits 2.
// Thread-safe (pure functions, apart from reading --token-file).
#ifndef MUSTER_AGENT_RUN_FLAGS_H_
#define MUSTER_AGENT_RUN_FLAGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/config/flag_table.h"
#include "agent/config/host_info.h"
#include "agent/config/subcommand.h"

namespace muster {

// The two command lines that start a node's workers: `muster run` (torchrun's) and `muster
// launch` (torch.distributed.launch's: the same flags, and each worker's script gets
// --local-rank=N unless --use-env).
enum class RunForm { kRun, kLaunch };

// The form's subcommand for the preamble: its usage, flag table and help epilogue.
const Subcommand& RunSubcommand(RunForm form = RunForm::kRun);

// `flags` are the words after `muster run` (or `launch`) split by RunSubcommand's table
// (with the environment they resolve against). Returns the config, or InvalidArgument
// naming the flag or variable.
absl::StatusOr<Config> ParseRunFlags(const FlagValues& flags, const HostInfo& host,
                                     RunForm form = RunForm::kRun);

// The same from the words after `muster run` and the agent's environment. Check
// RunHelpRequested first.
absl::StatusOr<Config> ParseRunFlags(const std::vector<std::string>& args,
                                     const std::map<std::string, std::string>& env,
                                     const HostInfo& host, RunForm form = RunForm::kRun);

// The `muster run --help` text (grouped, with defaults).
std::string RunHelp();

// True when args ask for help (-h/--help before the command).
bool RunHelpRequested(const std::vector<std::string>& args);

}  // namespace muster

#endif  // MUSTER_AGENT_RUN_FLAGS_H_
