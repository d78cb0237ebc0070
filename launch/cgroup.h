// JobCgroup: the cgroup v2 subtree that holds this agent's workers (containment mode
// "cgroup", docs/design.md §4.5).
//
// Layout: <the agent's own cgroup>/muster-<agent pid>-<random>/a<N>, one leaf per attempt
// (the suffix: agents in different PID namespaces may share a cgroup and a pid). The agent
// holds a flock on its job cgroup from the moment it makes it (one taken by another agent's
// sweep before the flock is made again under a new name); one nobody holds belongs to an
// agent killed together with its watchdog, or before its watchdog started, and the next
// agent kills and removes it. The agent and its watchdog stay where they are; only workers
// (and everything they start) live in the leaves. No controller is ever enabled in the
// subtree, so cgroup v2's no-internal-process rule never applies: the job cgroup holds no
// process, the leaves hold no children, and the agent's own cgroup may keep its processes
// (a leaf or the root alike). A worker may make cgroups of its own below its leaf: they are
// signalled, killed and removed (depth first) with it.
//
// A worker is created in its leaf (clone3 CLONE_INTO_CGROUP, SpawnSpec::cgroup_dir_fd; see
// launch/clone_into_cgroup.h) or, where the kernel or CPU lacks that, enters it in the spawn
// child before execve (SpawnSpec::cgroup_procs_fd: the child writes "0" to cgroup.procs), so
// no code of the worker ever runs outside it; no setsid or double fork leaves a cgroup.
// Cleanup is cgroup.kill
// (kernel >= 5.14), which the watchdog also uses on the whole job cgroup when the agent is
// SIGKILLed. Cgroups are removed once cgroup.events says "populated 0"; WaitFd() turns that file's
// changes into an fd an event loop can watch (inotify), so nobody polls.
//
// Containment holds against workers that try to leave: moving a process to another cgroup
// needs write access to cgroup.procs of the lowest cgroup above both (uid 0 owns them all;
// the agent's user owns the job cgroup), and where cgroup2 is mounted with nsdelegate, both
// cgroups must also lie in the mover's cgroup namespace. So with nsdelegate workers are
// given a cgroup namespace rooted at their leaf (unshare before execve), and only
// CAP_SYS_ADMIN in the user namespace that owns the agent's cgroup namespace (setns into
// it) lets them out;
// without nsdelegate any worker can move itself up. escape() names what applies here;
// `--containment cgroup` refuses to run workers that could leave unless told
// (launch/containment.h).
//
// Create() fails (and the agent falls back to mode "session") when there is no cgroup2
// mount, the agent's cgroup is not writable (read-only cgroupfs in an unprivileged
// container), or cgroup.kill is missing. Not thread-safe: the loop thread only.
#ifndef MUSTER_LAUNCH_CGROUP_H_
#define MUSTER_LAUNCH_CGROUP_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"

namespace muster {

// The directory of the calling process's cgroup v2, from /proc/self/mountinfo (the cgroup2
// mount, wherever it is) and /proc/self/cgroup ("0::/path"). NotFound without cgroup2.
absl::StatusOr<std::string> OwnCgroupDir();

class JobCgroup {
 public:
  // Makes <own cgroup>/muster-<pid>-<random> (after removing stale siblings) and checks
  // that a leaf can be made.
  static absl::StatusOr<std::unique_ptr<JobCgroup>> Create();
  ~JobCgroup();  // removes what is empty (best effort)
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  const std::string& path() const { return path_; }
  const std::string& leaf() const { return leaf_; }

  // A fresh leaf a<N> for the next attempt (the last one's is removed if empty).
  absl::Status BeginAttempt();
  // O_WRONLY fd of the current leaf's cgroup.procs, for SpawnSpec::cgroup_procs_fd.
  int procs_fd() const { return procs_.get(); }
  // The current leaf's directory, for SpawnSpec::cgroup_dir_fd (clone3 CLONE_INTO_CGROUP).
  int dir_fd() const { return leaf_dir_.get(); }
  // Readable (inotify) whenever the current leaf's cgroup.events changes.
  int wait_fd() const { return inotify_.get(); }
  // Drains wait_fd().
  void ConsumeWaitEvents();

  // Workers get a cgroup namespace rooted at their leaf (SpawnSpec::new_cgroup_namespace):
  // cgroup2 is mounted with nsdelegate, so the kernel then refuses to move them out of it,
  // and the agent holds CAP_SYS_ADMIN, which unshare(CLONE_NEWCGROUP) needs.
  bool namespaced() const { return namespaced_; }
  // How workers could leave their leaf anyway (the privilege that lets them), e.g. "write
  // access to /sys/fs/cgroup/cgroup.procs (...)"; "" when the kernel keeps them in.
  const std::string& escape() const { return escape_; }

  // True while any process is in the current leaf.
  bool Populated() const;
  // SIGKILL to everything in the current leaf and below it, at once (cgroup.kill).
  void Kill();
  // `sig` to every process of the current leaf and of every cgroup a worker made below it,
  // each through a pidfd.
  void Signal(int sig);
  // Every process of the current leaf and of the cgroups below it, read now (a process that
  // outlived cgroup.kill is still listed: launch/stuck_process.h).
  std::vector<pid_t> Procs() const;
  // Removes the current leaf and the cgroups below it (depth first) once they are empty;
  // false while they are populated.
  bool RemoveLeaf();

 private:
  explicit JobCgroup(std::string path) : path_(std::move(path)) {}

  std::string path_;      // the job cgroup
  std::string relative_;  // path_ as /proc/PID/cgroup names it
  std::string leaf_;      // the current attempt's, "" before the first
  int next_leaf_ = 0;
  bool namespaced_ = false;
  std::string escape_;
  UniqueFd lock_;  // the job cgroup's directory, flocked while the agent lives
  UniqueFd procs_, leaf_dir_, inotify_;
};

// Kills and removes every muster-* cgroup in `dir` that no agent holds (flock) and that is
// older than `min_age`. Returns how many were removed.
int RemoveStaleJobCgroups(const std::string& dir, absl::Duration min_age);

// For the watchdog (async-signal-safe: raw system calls, no allocation): cgroup.kill of
// `job_dir`, then waits (inotify on cgroup.events, up to `timeout_ms`) until it is empty and
// removes every cgroup below it (depth first: workers may have made their own below their
// leaves) and itself. True when everything was removed.
bool KillAndRemoveCgroupTree(const char* job_dir, int timeout_ms);

}  // namespace muster

#endif  // MUSTER_LAUNCH_CGROUP_H_
