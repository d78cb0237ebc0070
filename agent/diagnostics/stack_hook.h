// The workers' stack hook (issue 17 item 1, docs/guides/hangs-and-stacks.md "Stacks"): a
// sitecustomize.py that the agent writes into its run directory and puts first on every worker's
// PYTHONPATH. In a Python worker it registers faulthandler for kStackSignal, writing every thread's
// stack to <worker dir>/stacks-<pid>.txt, then runs the next sitecustomize on sys.path (the user's
// or the distribution's), so nothing the user had is shadowed. `muster stacks` (through
// agent/diagnostics/stack_collector.h) signals the worker and reads the file back.
//
// faulthandler dumps from its C signal handler: a rank blocked in C (a collective, I/O)
// or stuck in C holding the GIL answers too. Plain functions; thread-safe.
#ifndef MUSTER_AGENT_STACK_HOOK_H_
#define MUSTER_AGENT_STACK_HOOK_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace muster {

// SIGRTMIN+3: torch, SLURM (SIGUSR1/SIGUSR2 with --signal) and the preemption notice
// (SIGUSR1) leave it alone. A process without the hook would die of it (its default
// action), so it is only ever sent to a worker whose file says the hook is in place.
int StackSignal();

// The directory (under `run_dir`) that holds sitecustomize.py.
std::string StackHookDir(const std::string& run_dir);

// Writes StackHookDir(run_dir)/sitecustomize.py. An error names the path.
absl::Status WriteStackHook(const std::string& run_dir);

// Sets PYTHONPATH (the hook's directory first, then the inherited value), MUSTER_STACKS_DIR
// (`worker_dir`) and MUSTER_STACKS_SIGNAL in `env` ("NAME=value", sorted by name).
void AddStackHookEnv(const std::string& run_dir, const std::string& worker_dir,
                     std::vector<std::string>* env);

// Where a worker whose directory is `worker_dir` and pid `pid` writes its stacks.
std::string StackFile(const std::string& worker_dir, pid_t pid);

// The first line the hook writes once faulthandler is registered; a file without it
// belongs to a process that must not get StackSignal().
inline constexpr char kStackHookReady[] = "muster-stacks-ready";

}  // namespace muster

#endif  // MUSTER_AGENT_STACK_HOOK_H_
