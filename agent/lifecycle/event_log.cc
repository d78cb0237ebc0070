#include "agent/lifecycle/event_log.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/errno_status.h"
#include "spdlog/spdlog.h"

namespace muster {

absl::StatusOr<std::unique_ptr<EventLog>> EventLog::Open(const std::string& path) {
  if (path.empty()) return std::unique_ptr<EventLog>(new EventLog(UniqueFd()));
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("open --event-log " + path, errno);
  return std::unique_ptr<EventLog>(new EventLog(UniqueFd(fd)));
}

void EventLog::Write(const std::string& event, nlohmann::json fields) {
  if (!fd_.valid()) return;
  timespec mono;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  nlohmann::json line = {
      {"event", event},
      {"time", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone())},
      {"mono_ns", static_cast<int64_t>(mono.tv_sec) * 1000000000 + mono.tv_nsec}};
  line.update(fields);
  std::string text = line.dump() + "\n";
  ssize_t n;
  do {
    n = write(fd_.get(), text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(text.size()) && !warned_) {
    warned_ = true;
    spdlog::warn("cannot write the event log: {}", n < 0 ? strerror(errno) : "short write");
  }
}

}  // namespace muster
