#include "launch/worker_source.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "launch/pidfd.h"
#include "spdlog/spdlog.h"

namespace muster {

const char* WorkerStartName(WorkerStart start) {
  switch (start) {
    case WorkerStart::kExec:
      return "exec";
    case WorkerStart::kWarm:
      return "warm";
  }
  return "exec";
}

SpawnSpec ContainedSpawnSpec(SpawnSpec spec, const WorkerContainment& containment) {
  spec.cgroup_dir_fd = containment.cgroup_dir_fd;
  spec.cgroup_procs_fd = containment.cgroup_procs_fd;
  spec.new_cgroup_namespace = containment.new_cgroup_namespace;
  spec.report_fd = containment.report_fd;  // the child reports itself
  // First, so that a descendant that copies only the start of its environment keeps it.
  if (!containment.mark.empty()) spec.env.insert(spec.env.begin(), containment.mark);
  return spec;
}

absl::StatusOr<WorkerSource::Started> ExecSource::Start(const SpawnSpec& spec,
                                                        const WorkerContainment& containment,
                                                        int stdout_fd, int stderr_fd) {
  SpawnSpec contained = ContainedSpawnSpec(spec, containment);
  if (stdout_fd >= 0) contained.fds.push_back({stdout_fd, 1});
  if (stderr_fd >= 0) contained.fds.push_back({stderr_fd, 2});
  absl::StatusOr<pid_t> pid = Spawn(contained);
  if (!pid.ok()) return pid.status();
  // Our child, not reaped (reaping happens on this thread): the pid is still its own.
  Started started{.pid = *pid, .pidfd = UniqueFd(PidfdOpen(*pid))};
  if (!started.pidfd.valid()) spdlog::warn("pidfd_open({}): {}", *pid, strerror(errno));
  return started;
}

}  // namespace muster
