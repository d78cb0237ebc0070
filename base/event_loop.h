// EventLoop: muster's one reactor (docs/design.md §2, where each thread's loop is named):
// one epoll instance plus deadline timers, driven by one thread. The agent's main loop,
// the c10d store, the shared port, etcd liveness, the etcd brain and the /metrics server
// each run one on a thread of their own; base/acceptor.h accepts on it (the /metrics and
// local stacks servers still accept by hand: docs/design.md §6).
//
// Owns the epoll fd and an eventfd for Post() and Quit(); callers own their fds and must
// Remove() them before closing. Not thread-safe except Post() and Quit(): every other
// method is called from the loop's thread (callbacks run there too). Timers are kept in an
// ordered map and turned into the epoll_wait timeout, so an idle loop sleeps until the next
// deadline or fd event and never wakes on an interval.
#ifndef MUSTER_BASE_EVENT_LOOP_H_
#define MUSTER_BASE_EVENT_LOOP_H_

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "base/unique_fd.h"

namespace muster {

class EventLoop {
 public:
  using FdCallback = std::function<void(uint32_t events)>;
  using TimerCallback = std::function<void()>;
  using TimerId = uint64_t;

  static absl::StatusOr<std::unique_ptr<EventLoop>> Create();

  // Watches `fd` for `events` (EPOLLIN, EPOLLOUT, EPOLLET, ...); `cb` runs on readiness.
  absl::Status Add(int fd, uint32_t events, FdCallback cb);
  // Changes what a watched fd is watched for (0: nothing, for now).
  absl::Status Modify(int fd, uint32_t events);
  // Safe to call from inside a callback, including the fd's own: an event of this batch
  // for the fd is dropped, even when a new fd of the same number is added meanwhile.
  void Remove(int fd);

  // Runs `cb` once at `deadline` (monotonic clock). Returns an id for
  // CancelTimer.
  TimerId AddTimer(absl::Time deadline, TimerCallback cb);
  void CancelTimer(TimerId id);

  // Waits for events until the next timer deadline (or `max_wait`), dispatches
  // them, and fires due timers. Returns an error only when epoll_wait itself
  // fails.
  absl::Status RunOnce(absl::Duration max_wait = absl::InfiniteDuration());
  // RunOnce until Quit(), calling `after_each` (if any) after every round of callbacks:
  // where an owner does work batched over one wake-up (the store flushes its replies).
  absl::Status Run(const std::function<void()>& after_each = nullptr);

  // Thread-safe: runs `fn` on the loop thread soon (FIFO). How other threads (gRPC
  // callbacks) hand work to the loop.
  void Post(std::function<void()> fn);
  // Thread-safe and async-signal-safe: Run() returns once the callbacks in hand are done;
  // quitting() turns true at once.
  void Quit();
  bool quitting() const { return quitting_.load(std::memory_order_acquire); }

  // The loop's notion of now: CLOCK_MONOTONIC as absl::Time (not wall time).
  static absl::Time Now();

 private:
  struct Watch {
    uint32_t generation = 0;  // the high half of epoll_event.data.u64; the fd is the low half
    std::unique_ptr<FdCallback> cb;
  };

  EventLoop() = default;
  void FireDueTimers();
  void RunPosted();

  UniqueFd epoll_fd_;
  UniqueFd post_fd_;  // eventfd: readable while posted work is queued, or after Quit()
  std::atomic<bool> quitting_{false};
  Mutex post_mu_;
  std::deque<std::function<void()>> posted_ ABSL_GUARDED_BY(post_mu_);
  // The watch of `fd`, or null.
  Watch* Find(int fd) {
    if (fd < 0 || static_cast<size_t>(fd) >= watches_.size() || !watches_[fd].cb) return nullptr;
    return &watches_[fd];
  }

  std::vector<Watch> watches_;  // by fd (descriptors are small and dense); no cb: not watched
  uint32_t next_generation_ = 0;
  // Callbacks removed during this round: destroyed after it, so that a callback that
  // removes its own fd keeps itself alive while it runs.
  std::vector<std::unique_ptr<FdCallback>> removed_;
  std::multimap<absl::Time, TimerId> deadlines_;
  absl::flat_hash_map<TimerId, std::pair<absl::Time, TimerCallback>> timers_;
  TimerId next_timer_id_ = 1;
};

}  // namespace muster

#endif  // MUSTER_BASE_EVENT_LOOP_H_
