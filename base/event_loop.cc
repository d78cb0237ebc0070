#include "base/event_loop.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <utility>

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
  const uint32_t generation = next_generation_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = (uint64_t{generation} << 32) | static_cast<uint32_t>(fd);
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return ErrnoStatus("epoll_ctl(ADD)", errno);
  }
  if (static_cast<size_t>(fd) >= watches_.size()) watches_.resize(fd + 1);
  watches_[fd] = Watch{generation, std::make_unique<FdCallback>(std::move(cb))};
  return absl::OkStatus();
}

absl::Status EventLoop::Modify(int fd, uint32_t events) {
  const Watch* watch = Find(fd);
  if (watch == nullptr) return absl::NotFoundError("epoll_ctl(MOD): fd not watched");
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = (uint64_t{watch->generation} << 32) | static_cast<uint32_t>(fd);
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) {
    return ErrnoStatus("epoll_ctl(MOD)", errno);
  }
  return absl::OkStatus();
}

void EventLoop::Remove(int fd) {
  if (Find(fd) == nullptr) return;
  removed_.push_back(std::move(watches_[fd].cb));
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

void EventLoop::Quit() {
  quitting_.store(true, std::memory_order_release);
  uint64_t one = 1;
  // EAGAIN: the counter is already non-zero, the loop is being woken anyway.
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
  if (deadlines_.empty()) return;  // the store's loop has none: no clock read per wake-up
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
  // As many as the store serves in one wake-up at a thousand busy connections.
  epoll_event events[256];
  int n = WaitForEvents(epoll_fd_.get(), events, 256, wait);
  if (n < 0) {
    // EINTR: a signal we do not block (SIGSTOP/SIGCONT from a debugger)
    // interrupted the wait; that is not an error, just loop again.
    if (errno == EINTR) return absl::OkStatus();
    return ErrnoStatus("epoll_wait", errno);
  }
  for (int i = 0; i < n; ++i) {
    const int fd = static_cast<int>(static_cast<uint32_t>(events[i].data.u64));
    const Watch* watch = Find(fd);
    // Gone, or removed and added again by an earlier callback of this batch: the event
    // was for the fd that is no more.
    if (watch == nullptr || watch->generation != events[i].data.u64 >> 32) continue;
    (*watch->cb)(events[i].events);  // stays alive in removed_ if it removes itself
  }
  FireDueTimers();
  removed_.clear();
  return absl::OkStatus();
}

absl::Status EventLoop::Run(const std::function<void()>& after_each) {
  while (!quitting()) {
    absl::Status ran = RunOnce();
    if (!ran.ok()) return ran;
    if (after_each) after_each();
  }
  return absl::OkStatus();
}

}  // namespace muster
