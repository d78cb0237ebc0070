#include "launch/containment.h"

#include "absl/strings/str_cat.h"

namespace muster {

absl::StatusOr<ContainmentChoice> ChooseContainment(Containment requested) {
  if (requested == Containment::kSession) {
    return ContainmentChoice{nullptr, "session (--containment session)"};
  }
  absl::StatusOr<std::unique_ptr<JobCgroup>> cgroup = JobCgroup::Create();
  if (cgroup.ok()) {
    std::string description = absl::StrCat("cgroup ", (*cgroup)->path());
    return ContainmentChoice{*std::move(cgroup), std::move(description)};
  }
  if (requested == Containment::kCgroup) {
    return absl::FailedPreconditionError(
        absl::StrCat("--containment cgroup: cannot make a cgroup: ", cgroup.status().message()));
  }
  return ContainmentChoice{nullptr,
                           absl::StrCat("session (no cgroup: ", cgroup.status().message(), ")")};
}

}  // namespace muster
