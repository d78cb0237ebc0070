#include "launch/console_writer.h"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "base/errno_status.h"

namespace muster {
namespace {

constexpr size_t kBatchBytes = 64 * 1024;

// Writes all of `data`, retrying short writes. Errors (EPIPE from a closed
// console, EIO from a hung-up terminal) drop the output: there is nowhere else
// to put it, and the agent must keep supervising.
void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += n;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ConsoleWriter>> ConsoleWriter::Start(size_t source_limit) {
  std::unique_ptr<ConsoleWriter> w(new ConsoleWriter(source_limit));
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return ErrnoStatus("eventfd", errno);
  w->space_fd_.reset(fd);
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

ConsoleWriter::~ConsoleWriter() {
  Close();
  Drain(absl::Seconds(2));
  bool drained;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drained = pending_ == 0;
  }
  // If the console is blocked for good, the thread is stuck in write(); detach
  // rather than hang the agent's exit. Process exit ends it.
  if (drained) {
    thread_.join();
  } else {
    thread_.detach();
  }
}

int ConsoleWriter::AddSource(int out_fd) {
  std::lock_guard<std::mutex> lock(mu_);
  sources_.push_back(Source{out_fd, {}, 0, false});
  return static_cast<int>(sources_.size()) - 1;
}

bool ConsoleWriter::Push(int source, std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  Source& s = sources_[source];
  s.bytes += text.size();
  pending_ += text.size();
  s.queue.push_back(std::move(text));
  if (s.bytes > limit_) s.full = true;
  work_cv_.notify_one();
  return !s.full;
}

bool ConsoleWriter::HasSpace(int source) {
  std::lock_guard<std::mutex> lock(mu_);
  return !sources_[source].full;
}

void ConsoleWriter::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
}

void ConsoleWriter::Drain(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  drained_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return pending_ == 0; });
}

void ConsoleWriter::Run() {
  // Writing worker output is throughput work: never preempt the agent's loop when it
  // hands over lines (SCHED_BATCH keeps the thread's CPU share). Best effort.
  sched_param param{};
  (void)sched_setscheduler(0, SCHED_BATCH, &param);
  size_t next = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_ || pending_ > 0; });
    if (pending_ == 0 && stop_) return;
    // Round robin: one batch from the next non-empty source.
    size_t n = sources_.size();
    for (size_t i = 0; i < n; ++i, next = (next + 1) % n) {
      if (!sources_[next].queue.empty()) break;
    }
    Source& s = sources_[next];
    std::string batch;
    while (!s.queue.empty() && batch.size() < kBatchBytes) {
      batch += s.queue.front();
      s.queue.pop_front();
    }
    int fd = s.out_fd;
    size_t index = next;
    next = (next + 1) % n;
    lock.unlock();
    WriteAll(fd, batch);
    lock.lock();
    Source& after = sources_[index];  // the vector may have grown meanwhile
    after.bytes -= batch.size();
    pending_ -= batch.size();
    if (after.full && after.bytes <= limit_ / 2) {
      after.full = false;
      uint64_t one = 1;
      // EAGAIN means the counter is already non-zero: the loop will wake
      // anyway.
      [[maybe_unused]] ssize_t r = write(space_fd_.get(), &one, sizeof(one));
    }
    if (pending_ == 0) drained_cv_.notify_all();
  }
}

}  // namespace muster
