// Containment: how the agent makes sure nothing a worker started outlives the job or the
// agent (docs/design.md §4.5; launch/cgroup.h, launch/watchdog.h, launch/process_group.h).
//
// `--containment auto` (default) uses a cgroup where one can be made, else sessions;
// `cgroup` refuses to start without one; `session` never tries. The mode in force is shown
// by --dry-run and in the status file.
#ifndef MUSTER_LAUNCH_CONTAINMENT_H_
#define MUSTER_LAUNCH_CONTAINMENT_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "launch/cgroup.h"

namespace muster {

enum class Containment { kAuto, kCgroup, kSession };

inline std::string_view ContainmentName(Containment c) {
  switch (c) {
    case Containment::kAuto:
      return "auto";
    case Containment::kCgroup:
      return "cgroup";
    case Containment::kSession:
      return "session";
  }
  return "?";
}

inline std::optional<Containment> ParseContainment(std::string_view text) {
  for (Containment c : {Containment::kAuto, Containment::kCgroup, Containment::kSession}) {
    if (text == ContainmentName(c)) return c;
  }
  return std::nullopt;
}

// The mode in force for `requested`: a job cgroup (mode cgroup) or none (mode session),
// whether the agent then runs under a supervisor (mode session, not PID 1:
// launch/supervisor.h), and a line that says all that and why, e.g. "cgroup
// /sys/fs/cgroup/muster-12" or "session (no cgroup: mkdir ...: Read-only file system),
// under a supervisor". FailedPrecondition when `requested` is kCgroup and no cgroup can be
// made, or when workers could leave it (JobCgroup::escape()) and `allow_escape`
// (--allow-cgroup-escape) is false; mode auto uses such a cgroup all the same and logs the
// escape route.
struct ContainmentChoice {
  std::unique_ptr<JobCgroup> cgroup;
  bool supervised = false;
  std::string description;
};
absl::StatusOr<ContainmentChoice> ChooseContainment(Containment requested,
                                                    bool allow_escape = false);

}  // namespace muster

#endif  // MUSTER_LAUNCH_CONTAINMENT_H_
