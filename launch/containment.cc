#include "launch/containment.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

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

absl::StatusOr<ContainmentChoice> ChooseContainment(Containment requested, bool allow_escape) {
  if (requested == Containment::kSession) {
    return SessionMode("--containment session");
  }
  absl::StatusOr<std::unique_ptr<JobCgroup>> cgroup = JobCgroup::Create();
  if (cgroup.ok() && !(*cgroup)->escape().empty()) {
    if (requested == Containment::kCgroup && !allow_escape) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--containment cgroup: workers could leave their cgroup: they would hold ",
          (*cgroup)->escape(),
          ". Mount cgroup2 with nsdelegate and run muster in a user namespace whose cgroup "
          "namespace an outer one owns (a container), or pass --allow-cgroup-escape to run "
          "them anyway (docs/operations/containment.md)"));
    }
    // A debug line: every root agent on a host without nsdelegate would print it on every
    // run (the common case in containers); --dry-run and the docs say it.
    spdlog::debug("containment cgroup: workers can leave their cgroup: they hold {}{}",
                 (*cgroup)->escape(),
                 allow_escape ? " (--allow-cgroup-escape)" : " (--containment cgroup refuses)");
  }
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
