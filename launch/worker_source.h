// WorkerSource: where a worker comes from, kept apart from how it is supervised
// (docs/design.md §4.5).
//
// WorkerGroup supervises every worker the same way, whatever made it: its exit status (the
// agent reaps it on SIGCHLD), signals (through its pidfd and the attempt's ProcessGroup),
// containment (the attempt's cgroup or its session, launch/process_group.h), its output
// (per-rank files, the console, the stderr tail, launch/worker_output.h) and its error
// file. A source only starts the process and hands it over as an AdoptedWorker: a pid, a
// pidfd, and the read ends of its stdout and stderr.
//
// What a source guarantees before any of the job's code runs in the worker:
// - the worker is a child of the agent's process, so that the agent's reap sees its exact
//   wait status (exec'd by the agent, or forked by a helper of the agent with CLONE_PARENT,
//   as a warm pre-imported Python that makes ranks would),
// - it is contained as WorkerContainment says (cgroup mode: inside the attempt's leaf;
//   session mode: a session of its own, reported to the watchdog, the mark first in its
//   environment),
// - it runs with the spec's argv, environment, directory, CPUs and memory policy, with
//   stdout and stderr on the fds it is given, dies with the agent (PDEATHSIG), and holds
//   no other fd of the agent.
//
// ExecSource: clone + exec (launch/spawner.h). WarmSource (launch/warm_source.h): forked
// from a Python that imported torch once.
// Not thread-safe: the loop thread only.
#ifndef MUSTER_LAUNCH_WORKER_SOURCE_H_
#define MUSTER_LAUNCH_WORKER_SOURCE_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "base/unique_fd.h"
#include "launch/spawner.h"

namespace muster {

// Which way a worker was started: shown in the status file and the event log.
enum class WorkerStart {
  kExec,  // clone + exec
  kWarm,  // forked from the warm template (launch/warm_source.h)
};
// "exec", "warm".
const char* WorkerStartName(WorkerStart start);

// A worker handed to supervision.
struct AdoptedWorker {
  pid_t pid = 0;
  UniqueFd pidfd;                 // invalid only where the kernel has no pidfd_open
  UniqueFd stdout_fd, stderr_fd;  // read ends of its stdout and stderr
};

// Where the attempt's workers must be (ProcessGroup::containment()).
struct WorkerContainment {
  // cgroup mode: the attempt's leaf, to be created in (clone3) or entered (cgroup.procs).
  int cgroup_dir_fd = -1;
  int cgroup_procs_fd = -1;
  bool new_cgroup_namespace = false;  // and a cgroup namespace rooted there
  // session mode: the watchdog's socket the worker reports its pid and pidfd on, and the
  // mark (MUSTER_AGENT_MARK=...) first in its environment.
  int report_fd = -1;
  std::string mark;
};

// `spec` with `containment` applied: what the spawn child does before execve.
SpawnSpec ContainedSpawnSpec(SpawnSpec spec, const WorkerContainment& containment);

class WorkerSource {
 public:
  // The pid and pidfd of a worker just started.
  struct Started {
    pid_t pid = 0;
    UniqueFd pidfd;
    WorkerStart how = WorkerStart::kExec;
    // Why a source that forks (WarmSource) exec'd this one instead; empty otherwise.
    std::string fallback;
  };

  virtual ~WorkerSource() = default;

  // Starts the worker `spec` describes, contained as `containment` says, with its stdout
  // and stderr on `stdout_fd` and `stderr_fd` (write ends; the caller keeps the read ends
  // and closes its copies of these once Start returns; -1: the agent's own). Errors: the worker
  // could not be started, as Spawn's (NotFound, PermissionDenied, Unavailable, ...), reported like
  // an exit with 126/127/138 (SpawnFailureExitCode).
  virtual absl::StatusOr<Started> Start(const SpawnSpec& spec, const WorkerContainment& containment,
                                        int stdout_fd, int stderr_fd) = 0;

  // A child of the agent the source keeps for itself (a warm template): not the job's, so
  // stopping an attempt leaves it alone.
  virtual bool IsOwnHelper(pid_t pid) const {
    (void)pid;
    return false;
  }
};

// clone + exec through launch/spawner.h.
class ExecSource : public WorkerSource {
 public:
  absl::StatusOr<Started> Start(const SpawnSpec& spec, const WorkerContainment& containment,
                                int stdout_fd, int stderr_fd) override;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_WORKER_SOURCE_H_
