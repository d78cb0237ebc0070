// PreemptFileWatch: --preempt-file (docs/guides/preemption.md). Watches the file's directory with
// inotify (no polling) and calls `on_appeared` once, on the loop thread, when a file of that
// name is created, moved there or written: a spot-instance notice written by a metadata
// poller or a node agent. A file already there when the watch starts does not count (a
// stale notice from an earlier run); it counts once it is written again.
//
// Owned by the agent; the loop must outlive it. Not thread-safe: the loop thread only.
#ifndef MUSTER_AGENT_PREEMPT_FILE_WATCH_H_
#define MUSTER_AGENT_PREEMPT_FILE_WATCH_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/event_loop.h"
#include "base/unique_fd.h"

namespace muster {

class PreemptFileWatch {
 public:
  // `reason`: the file's first line (at most 200 bytes), or "preempt file PATH appeared".
  using Callback = std::function<void(const std::string& reason)>;

  // InvalidArgument naming --preempt-file when its directory does not exist or cannot be
  // watched.
  static absl::StatusOr<std::unique_ptr<PreemptFileWatch>> Start(EventLoop* loop,
                                                                 const std::string& path,
                                                                 Callback on_appeared);
  ~PreemptFileWatch();

 private:
  PreemptFileWatch(EventLoop* loop, std::string path, std::string name, UniqueFd fd, Callback cb);
  void OnReadable();

  EventLoop* const loop_;
  const std::string path_;
  const std::string name_;  // the file's name inside the watched directory
  UniqueFd fd_;
  Callback on_appeared_;
  bool fired_ = false;
};

}  // namespace muster

#endif  // MUSTER_AGENT_PREEMPT_FILE_WATCH_H_
