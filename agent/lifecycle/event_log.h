// EventLog: the agent's transitions as JSON lines (--event-log FILE), one line per event,
// each written with a single O_APPEND write so concurrent readers never see half a line.
// Every line carries wall time ("time", RFC 3339) and CLOCK_MONOTONIC nanoseconds
// ("mono_ns"), so benchmarks can compare it with timestamps workers take themselves.
// Not thread-safe: the agent's loop thread only.
#ifndef MUSTER_AGENT_EVENT_LOG_H_
#define MUSTER_AGENT_EVENT_LOG_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/unique_fd.h"
#include "nlohmann/json.hpp"

namespace muster {

class EventLog {
 public:
  // An empty path gives a log that drops everything.
  static absl::StatusOr<std::unique_ptr<EventLog>> Open(const std::string& path);

  // {"event": name, "time": ..., "mono_ns": ..., fields...}. Write errors are logged once
  // and otherwise ignored: the event log must never stop supervision.
  void Write(const std::string& event, nlohmann::json fields = nlohmann::json::object());
  // False for the log that drops everything: callers on per-worker paths skip building fields.
  bool enabled() const { return fd_.valid(); }

 private:
  explicit EventLog(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
  bool warned_ = false;
};

}  // namespace muster

#endif  // MUSTER_AGENT_EVENT_LOG_H_
