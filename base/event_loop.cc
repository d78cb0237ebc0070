#include "base/event_loop.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <vector>

#include "base/errno_status.h"

namespace muster {
namespace {

std::atomic<bool> have_epoll_pwait2{true};

// epoll_wait for at most `wait`. With epoll_pwait2 (Linux 5.11) the timeout has nanosecond
// resolution, so a timer fires on time; epoll_wait's millisecond timeout, rounded up so that
// it never fires early, made every timer up to 1 ms late (the SIGKILL after the grace period,
// B8). Older kernels get that fallback.
int WaitForEvents(int epoll_fd, epoll_event* events, int max_events, absl::Duration wait) {
  if (wait == absl::InfiniteDuration()) return epoll_wait(epoll_fd, events, max_events, -1);
  wait = std::min(wait, absl::Hours(24));  // re-armed by the caller's loop
  if (have_epoll_pwait2.load(std::memory_order_relaxed)) {
    timespec ts = absl::ToTimespec(wait);
    int n = epoll_pwait2(epoll_fd, events, max_events, &ts, nullptr);
    if (n >= 0 || errno != ENOSYS) return n;
    have_epoll_pwait2.store(false, std::memory_order_relaxed);
  }
  int timeout_ms = static_cast<int>(std::ceil(absl::ToDoubleMilliseconds(wait)));
  return epoll_wait(epoll_fd, events, max_events, timeout_ms);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create() {
  int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return ErrnoStatus("epoll_create1", errno);
  std::unique_ptr<EventLoop> loop(new EventLoop());
  loop->epoll_fd_.reset(fd);
  int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return ErrnoStatus("eventfd", errno);
  loop->post_fd_.reset(efd);
  EventLoop* self = loop.get();
  absl::Status st = loop->Add(efd, EPOLLIN, [self](uint32_t) { self->RunPosted(); });
  if (!st.ok()) return st;
  return loop;
}

absl::Status EventLoop::Add(int fd, uint32_t events, FdCallback cb) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return ErrnoStatus("epoll_ctl(ADD)", errno);
  }
  callbacks_[fd] = std::make_shared<FdCallback>(std::move(cb));
  return absl::OkStatus();
}

void EventLoop::Remove(int fd) {
  if (callbacks_.erase(fd) == 0) return;
  // ENOENT/EBADF only if the caller already closed the fd, which the kernel
  // then dropped from the epoll set by itself; nothing is left to undo.
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr);
}

EventLoop::TimerId EventLoop::AddTimer(absl::Time deadline, TimerCallback cb) {
  TimerId id = next_timer_id_++;
  deadlines_.emplace(deadline, id);
  timers_.emplace(id, std::make_pair(deadline, std::move(cb)));
  return id;
}

void EventLoop::CancelTimer(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) return;
  auto range = deadlines_.equal_range(it->second.first);
  for (auto d = range.first; d != range.second; ++d) {
    if (d->second == id) {
      deadlines_.erase(d);
      break;
    }
  }
  timers_.erase(it);
}

void EventLoop::Post(std::function<void()> fn) {
  {
    MutexLock lock(&post_mu_);
    posted_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  // EAGAIN only if the counter would overflow, i.e. the loop is already due to wake.
  [[maybe_unused]] ssize_t n = write(post_fd_.get(), &one, sizeof(one));
}

void EventLoop::RunPosted() {
  uint64_t count;
  // EAGAIN: a previous RunPosted already consumed the counter; the queue decides.
  [[maybe_unused]] ssize_t n = read(post_fd_.get(), &count, sizeof(count));
  std::deque<std::function<void()>> batch;
  {
    MutexLock lock(&post_mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
}

absl::Time EventLoop::Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return absl::TimeFromTimespec(ts);
}

void EventLoop::FireDueTimers() {
  absl::Time now = Now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    TimerId id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;
    TimerCallback cb = std::move(it->second.second);
    timers_.erase(it);
    cb();
  }
}

absl::Status EventLoop::RunOnce(absl::Duration max_wait) {
  absl::Duration wait = max_wait;
  if (!deadlines_.empty()) {
    wait = std::min(wait, std::max(absl::ZeroDuration(), deadlines_.begin()->first - Now()));
  }
  epoll_event events[64];
  int n = WaitForEvents(epoll_fd_.get(), events, 64, wait);
  if (n < 0) {
    // EINTR: a signal we do not block (SIGSTOP/SIGCONT from a debugger)
    // interrupted the wait; that is not an error, just loop again.
    if (errno == EINTR) return absl::OkStatus();
    return ErrnoStatus("epoll_wait", errno);
  }
  for (int i = 0; i < n; ++i) {
    auto it = callbacks_.find(events[i].data.fd);
    if (it == callbacks_.end()) continue;  // removed by an earlier callback in this batch
    std::shared_ptr<FdCallback> cb = it->second;
    (*cb)(events[i].events);
  }
  FireDueTimers();
  return absl::OkStatus();
}

}  // namespace muster
