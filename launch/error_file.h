// Reading and writing torch elastic's error file (TORCHELASTIC_ERROR_FILE,
// written by torch's @record decorator; reference/torch_contract.md §2.6).
// Thread-safe (no state).
#ifndef MUSTER_LAUNCH_ERROR_FILE_H_
#define MUSTER_LAUNCH_ERROR_FILE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace muster {

struct WorkerError {
  std::string message;    // "ValueError: boom from rank 1"
  std::string traceback;  // extraInfo.py_callstack, may be empty
  int64_t timestamp = 0;  // seconds since the epoch, 0 when absent
};

// nullopt when the file does not exist (the worker wrote none). Accepts both
// shapes torch reads: {"message": {"message": "...", "extraInfo": {...}}} and
// {"message": "...", "timestamp": N}. A file that is not valid JSON is an
// InvalidArgument error (the caller logs it and carries on; torch's agent
// crashes here).
absl::StatusOr<std::optional<WorkerError>> ReadErrorFile(const std::string& path);

// Writes the root cause to the agent's own error file the way torchrun does
// (the worker's record with message.errorCode = exit code), so a parent
// launcher reading TORCHELASTIC_ERROR_FILE sees it. Written to a temp file and
// renamed.
absl::Status WriteAgentErrorFile(const std::string& path, const WorkerError& error, int exit_code);

}  // namespace muster

#endif  // MUSTER_LAUNCH_ERROR_FILE_H_
