// Debug mode's files (docs/design.md §4.7, seeds/000-001): per local rank a shell-sourceable env
// file `<dir>/rank-<RANK>.env` with exactly what muster would give that worker, the
// worker's command line in `<dir>/rank-<RANK>.argv` (NUL-separated), and a DeepSpeed-style
// `<dir>/hostfile`. `muster exec --rank N` reads them back. Thread-safe (no state).
#ifndef MUSTER_AGENT_DEBUG_MODE_H_
#define MUSTER_AGENT_DEBUG_MODE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/config/run_plan.h"
#include "agent/config/subcommand.h"
#include "launch/worker_spec.h"
#include "rendezvous/core/types.h"

namespace muster {

// `export NAME='value'` lines for the variables in `worker_env` that differ from
// `agent_env` (what muster set); secrets of the agent (MUSTER_TOKEN) are never written.
std::string EnvFileText(const std::map<std::string, std::string>& agent_env,
                        const std::vector<std::string>& worker_env);

// Parses EnvFileText's format back into NAME -> value.
absl::StatusOr<std::map<std::string, std::string>> ParseEnvFile(const std::string& text);

// "address slots=N" per node of the round, in group-rank order.
std::string HostfileText(const rdzv::Assignment& assignment);

absl::Status WriteRankFiles(const std::string& dir, int rank, const std::string& env_text,
                            const std::vector<std::string>& argv);

// Whether debug mode runs /usr/sbin/sshd (no --debug-command, and sshd installed).
bool UsesDefaultSshd(const Config& config);

// With the default sshd: FailedPrecondition naming --debug-port when that port is already
// in use in this network namespace (the host's sshd on bare metal).
absl::Status CheckDebugPort(const Config& config);

// One round of debug mode: writes every local rank's files (from the same specs its
// workers would run with) and the hostfile into --debug-dir, and returns the shell command
// to run instead of the workers (--debug-command, or sshd / sleep infinity). The error
// names --debug-dir.
absl::StatusOr<std::string> PrepareDebugRound(const Config& config, const WorkerPlan& workers,
                                              const rdzv::Assignment& assignment,
                                              const std::vector<WorkerSpec>& specs);

// `muster exec --rank N [--debug-dir D] [--] [CMD...]`: runs rank N by hand with its env.
int ExecCommand(const std::vector<std::string>& args,
                const std::map<std::string, std::string>& env);
// `muster exec`'s usage and flag table (for docs/reference/flags.md).
const Subcommand& ExecSubcommand();

}  // namespace muster

#endif  // MUSTER_AGENT_DEBUG_MODE_H_
