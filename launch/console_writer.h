// ConsoleWriter: writes worker lines to the agent's stdout/stderr from its own
// thread, so a slow console (a full pipe, a stopped terminal) never blocks the
// agent's event loop.
//
// Every source (one worker stream) has its own queue, bounded by `source_limit`
// bytes; the writer takes one batch from each non-empty queue in turn, so a
// worker flooding its output cannot delay a sibling's lines by more than one
// batch. Push() reports when a queue is over its limit; the caller then stops
// reading that worker's pipe (the worker blocks in write, as it would on a slow
// terminal) until the writer signals space on space_fd() (an eventfd). Memory
// is bounded by sources × (limit + one read chunk).
//
// Thread-safe: Push/HasSpace/AddSource from the loop thread, writing on the
// writer thread.
#ifndef MUSTER_LAUNCH_CONSOLE_WRITER_H_
#define MUSTER_LAUNCH_CONSOLE_WRITER_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"

namespace muster {

class ConsoleWriter {
 public:
  static absl::StatusOr<std::unique_ptr<ConsoleWriter>> Start(size_t source_limit = 1 << 20);
  ~ConsoleWriter();  // drains for at most 2 s, then stops the thread

  // A new source writing to `out_fd` (1 or 2). Ids are never reused.
  int AddSource(int out_fd);
  // Queues `text` (whole lines, each ending in '\n'). Returns false when the
  // source's queue is now over its limit: stop feeding it until HasSpace().
  bool Push(int source, std::string text);
  bool HasSpace(int source);
  // Readable (eventfd) when a source that was over its limit has drained below
  // half.
  int space_fd() const { return space_fd_.get(); }
  // Waits until every queue is written or `timeout` passes.
  void Drain(absl::Duration timeout);
  // No more Push(): the writer thread ends once every queue is written. Does not wait
  // (the destructor does), so the agent's own teardown overlaps the last writes.
  void Close();

 private:
  struct Source {
    int out_fd;
    std::deque<std::string> queue;
    size_t bytes = 0;
    bool full = false;
  };
  explicit ConsoleWriter(size_t source_limit) : limit_(source_limit) {}
  void Run();

  const size_t limit_;
  UniqueFd space_fd_;
  std::mutex mu_;
  std::condition_variable work_cv_, drained_cv_;
  std::vector<Source> sources_ ABSL_GUARDED_BY(mu_);
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;  // bytes queued in all sources
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_CONSOLE_WRITER_H_
