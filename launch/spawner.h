// Spawn: starts one worker process without copying the agent's memory.
//
// clone(CLONE_VM | CLONE_VFORK) runs a tiny child on its own stack that only
// makes async-signal-safe syscalls: new session, PDEATHSIG, fd wiring, signal
// dispositions and mask reset, CPU affinity, memory policy, then execve. An exec failure
// travels back through a close-on-exec pipe, so the caller learns ENOENT/EACCES
// synchronously instead of seeing a mysterious exit 127 later. Call from the
// agent's main thread only: PDEATHSIG fires when the *thread* that created the
// child exits, and the main thread lives as long as the agent.
#ifndef MUSTER_LAUNCH_SPAWNER_H_
#define MUSTER_LAUNCH_SPAWNER_H_

#include <sched.h>
#include <signal.h>
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace muster {

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH unless it contains '/'
  std::vector<std::string> env;   // "NAME=value"; the complete environment
  // Child fd <- parent fd, applied with dup2 in order (e.g. {pipe_w, 1}).
  // Every other fd above 2 (the agent's own, and those it inherited) is closed
  // at exec and does not leak into the worker.
  std::vector<std::pair<int, int>> fds;
  std::string cwd;                    // empty: inherit
  bool new_session = true;            // setsid(): own session and process group
  int parent_death_signal = SIGKILL;  // 0: none
  std::vector<int> cpus;              // empty: inherit affinity
  // >= 0: the worker's memory policy prefers this NUMA node (set_mempolicy MPOL_PREFERRED;
  // other nodes when it is full); -1: inherit the agent's (the kernel's default: local).
  int preferred_memory_node = -1;
  // Containment (launch/cgroup.h, launch/watchdog.h), both done by the child before execve,
  // so nothing of the worker runs unaccounted for: an open cgroup.procs to enter (-1: stay),
  // and a SOCK_SEQPACKET socket that gets the child's pid and a pidfd of it (-1: none).
  int cgroup_procs_fd = -1;
  int report_fd = -1;
  // The same cgroup's directory: where the kernel can, the child is created in it
  // (clone_into_cgroup.h) and cgroup_procs_fd is not used. -1: enter by cgroup_procs_fd.
  int cgroup_dir_fd = -1;
  // Once in that cgroup: unshare(CLONE_NEWCGROUP), a cgroup namespace rooted there (needs
  // CAP_SYS_ADMIN; JobCgroup::namespaced()).
  bool new_cgroup_namespace = false;
};

// Returns the child's pid, or: NotFound (command not in PATH / no such file:
// exit 127 convention), PermissionDenied or FailedPrecondition (not executable:
// 126), Unavailable / ResourceExhausted when fork failed for want of processes
// (EAGAIN: pids cgroup or ulimit -u) or memory (ENOMEM): transient, or the errno
// of pipe. The child is reaped by the caller's normal SIGCHLD handling, except
// after an exec failure, which Spawn reaps itself. The child gets only 0, 1, 2 and
// the fds of `spec.fds`: every other fd, including those the agent inherited from
// its caller, is closed at exec.
absl::StatusOr<pid_t> Spawn(const SpawnSpec& spec);

// PATH lookup as execvp does it, done in the parent (the child must not
// allocate). `path_env` is the worker's PATH value.
absl::StatusOr<std::string> ResolveExecutable(const std::string& command,
                                              const std::string& path_env);

// The exit code convention for a failed exec: 127 for NotFound, 126 otherwise.
int ExecFailureExitCode(const absl::Status& status);

// Spawn's error says the process could not be made now (fork's EAGAIN/ENOMEM), not that
// the command cannot run: trying again later may work.
bool IsTransientSpawnFailure(const absl::Status& status);
// The code a worker that could not be started is reported with: 138 (transient) for
// IsTransientSpawnFailure, else ExecFailureExitCode's 126/127.
int SpawnFailureExitCode(const absl::Status& status);

}  // namespace muster

#endif  // MUSTER_LAUNCH_SPAWNER_H_
