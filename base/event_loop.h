// EventLoop: one epoll instance plus deadline timers, driven by one thread.
//
// Owns the epoll fd and an eventfd for Post(); callers own their fds and must
// Remove() them before closing. Not thread-safe except Post(): every other method
// is called from the loop's thread (callbacks run there too). Timers are kept in an ordered map and
// turned into the epoll_wait timeout, so an idle loop sleeps until the next
// deadline or fd event and never wakes on an interval.
#ifndef MUSTER_BASE_EVENT_LOOP_H_
#define MUSTER_BASE_EVENT_LOOP_H_

#include <sys/epoll.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
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

  // Watches `fd` for `events` (EPOLLIN, EPOLLOUT, ...); `cb` runs on readiness.
  absl::Status Add(int fd, uint32_t events, FdCallback cb);
  // Safe to call from inside a callback, including the fd's own.
  void Remove(int fd);

  // Runs `cb` once at `deadline` (monotonic clock). Returns an id for
  // CancelTimer.
  TimerId AddTimer(absl::Time deadline, TimerCallback cb);
  void CancelTimer(TimerId id);

  // Waits for events until the next timer deadline (or `max_wait`), dispatches
  // them, and fires due timers. Returns an error only when epoll_wait itself
  // fails.
  absl::Status RunOnce(absl::Duration max_wait = absl::InfiniteDuration());

  // Thread-safe: runs `fn` on the loop thread soon (FIFO). How other threads (gRPC
  // callbacks) hand work to the loop.
  void Post(std::function<void()> fn);

  // The loop's notion of now: CLOCK_MONOTONIC as absl::Time (not wall time).
  static absl::Time Now();

 private:
  EventLoop() = default;
  void FireDueTimers();

  void RunPosted();

  UniqueFd epoll_fd_;
  UniqueFd post_fd_;  // eventfd: readable while posted work is queued
  Mutex post_mu_;
  std::deque<std::function<void()>> posted_ ABSL_GUARDED_BY(post_mu_);
  // shared_ptr so a callback that removes its own fd keeps itself alive while
  // it runs.
  std::unordered_map<int, std::shared_ptr<FdCallback>> callbacks_;
  std::multimap<absl::Time, TimerId> deadlines_;
  std::unordered_map<TimerId, std::pair<absl::Time, TimerCallback>> timers_;
  TimerId next_timer_id_ = 1;
};

}  // namespace muster

#endif  // MUSTER_BASE_EVENT_LOOP_H_
