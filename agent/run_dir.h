// The run directory: where a round's per-rank files go (torch's error.json, -r/-t stream
// files, the debug mode's env files). Under --log-dir it is a fresh <log-dir>/<run-id>_XXXXXX
// that stays; without it, the same inside a private temporary root the agent removes at
// exit.
#ifndef MUSTER_AGENT_RUN_DIR_H_
#define MUSTER_AGENT_RUN_DIR_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/config.h"

namespace muster {

struct RunDir {
  std::string root;          // --log-dir, or the temporary root
  bool remove_root = false;  // the agent made the root: it removes it at exit
  std::string path;          // this run's directory under root
};

// Makes the directories. An error names what to change (--log-dir, TMPDIR).
absl::StatusOr<RunDir> MakeRunDir(const Config& config);

// A file the agent writes later (--status-file) must have its directory now: a status that
// never appears is worse than a refusal at start. `flag` names it in the error.
absl::Status CheckDirectoryOf(const char* flag, const std::string& path);

}  // namespace muster

#endif  // MUSTER_AGENT_RUN_DIR_H_
