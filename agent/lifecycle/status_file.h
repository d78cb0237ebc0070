// StatusFile: the agent's view of the job as one JSON document (--status-file), replaced
// atomically on every transition (write to a temporary file in the same directory, then
// rename), so a reader polling it never sees a partial file. Not thread-safe.
#ifndef MUSTER_AGENT_STATUS_FILE_H_
#define MUSTER_AGENT_STATUS_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "rendezvous/core/types.h"

namespace muster {

// A failure as every muster JSON document shows it (status file, event log, muster status).
nlohmann::json FailureJson(const rdzv::Failure& f);

// Writes `doc` to `path` atomically. A failed write leaves the previous document in place.
absl::Status WriteFileAtomically(const std::string& path, const std::string& content);

// Writes `line` to --termination-log, where Kubernetes shows it (`kubectl describe pod`).
// In place, not by rename: the file is often a bind mount. A failure is logged.
void WriteTerminationLog(const std::string& path, const std::string& line);

class StatusFile {
 public:
  explicit StatusFile(std::string path) : path_(std::move(path)) {}
  // Write errors are logged once and otherwise ignored: reporting must never stop
  // supervision.
  void Write(const nlohmann::json& doc);
  // False without a path: Write does nothing, so callers need not build the document.
  bool enabled() const { return !path_.empty(); }

 private:
  std::string path_;
  bool warned_ = false;
};

}  // namespace muster

#endif  // MUSTER_AGENT_STATUS_FILE_H_
