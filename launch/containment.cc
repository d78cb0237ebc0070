#include "launch/containment.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace muster {
namespace {

// Mode session: a supervisor above the agent unless the agent is PID 1 (launch/supervisor.h).
ContainmentChoice SessionMode(std::string why) {
  const bool pid1 = getpid() == 1;
  return ContainmentChoice{
      nullptr, !pid1,
      absl::StrCat("session (", why, "), ",
                   pid1 ? "as PID 1 (no supervisor needed)" : "under a supervisor (subreaper)")};
}

}  // namespace

absl::StatusOr<ContainmentChoice> ChooseContainment(Containment requested) {
  if (requested == Containment::kSession) {
    return SessionMode("--containment session");
  }
  absl::StatusOr<std::unique_ptr<JobCgroup>> cgroup = JobCgroup::Create();
  if (cgroup.ok()) {
    std::string description = absl::StrCat("cgroup ", (*cgroup)->path());
    return ContainmentChoice{*std::move(cgroup), false, std::move(description)};
  }
  if (requested == Containment::kCgroup) {
    return absl::FailedPreconditionError(
        absl::StrCat("--containment cgroup: cannot make a cgroup: ", cgroup.status().message()));
  }
  return SessionMode(absl::StrCat("no cgroup: ", cgroup.status().message()));
}

}  // namespace muster
