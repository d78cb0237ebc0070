// The run directory: where a round's per-rank files go (torch's error.json, -r/-t stream
// files, the debug mode's env files). Under --log-dir it is a fresh <log-dir>/<run-id>_XXXXXX
// that stays; without it, the same inside a private temporary root the agent removes at
// exit, unless the job failed and -r/-t wrote the workers' output there (torchrun keeps
// its log directory too).
#ifndef MUSTER_AGENT_RUN_DIR_H_
#define MUSTER_AGENT_RUN_DIR_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/config/run_plan.h"
#include "base/unique_fd.h"

namespace muster {

struct RunDir {
  std::string root;           // --log-dir, or the temporary root
  bool remove_root = false;   // the agent made the root: it removes it at exit
  std::string path;           // this run's directory under root
  bool stream_files = false;  // -r/-t write the workers' output into it
  UniqueFd lock;  // the temporary root's lock, held while the agent lives (stale_run_dirs.h)
};

// Makes the directories (this run's is named after the plan's run id), after removing the
// temporary roots of agents that died without cleaning up (stale_run_dirs.h). An error
// names what to change (--log-dir, TMPDIR).
absl::StatusOr<RunDir> MakeRunDir(const RunPlan& plan);

// At exit: removes the temporary root, except when `job_failed` and it holds stream files:
// then they are the failed job's logs, left for the user. Returns whether it left them.
bool CleanUpRunDir(const RunDir& dir, bool job_failed);

// A file the agent writes later (--status-file) must have its directory now: a status that
// never appears is worse than a refusal at start, and so is a path that names a directory
// (InvalidArgument). `flag` names it in the error.
absl::Status CheckDirectoryOf(const char* flag, const std::string& path);

}  // namespace muster

#endif  // MUSTER_AGENT_RUN_DIR_H_
