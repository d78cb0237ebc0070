#include "launch/console_writer.h"

#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/mutex.h"
#include "base/plural.h"
#include "base/unique_fd.h"

namespace muster {
namespace {

constexpr size_t kBatchBytes = 64 * 1024;
// One write() at most: a console that takes this much in `stall_after` is moving.
constexpr size_t kWriteChunk = 16 * 1024;

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t CountLines(const std::string& text) {
  return std::max<uint64_t>(1, std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

struct ConsoleWriter::State {
  struct Source {
    int out_fd;
    WhenFull when_full;
    std::deque<std::string> queue;
    size_t bytes = 0;
    bool full = false;
  };

  explicit State(const Options& o) : options(o) {}
  bool StalledLocked() const;
  // Writes all of `data` in chunks, recording progress for StalledLocked().
  void WriteAll(int fd, const std::string& data);
  void Run();
  // Takes one batch (whole entries) from the next non-empty source in turn.
  size_t TakeBatch(std::string* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Written(size_t index, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Writes the summary of what was dropped, with mu released meanwhile.
  void ReportDropped() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  const Options options;
  UniqueFd space_fd;
  // Written by the writer thread, read by Stalled() without waiting for it.
  std::atomic<bool> writing{false};
  std::atomic<int64_t> last_progress_ns{0};
  Mutex mu;
  CondVar work_cv, drained_cv;
  std::vector<Source> sources ABSL_GUARDED_BY(mu);
  size_t pending ABSL_GUARDED_BY(mu) = 0;  // bytes queued or being written, all sources
  size_t next ABSL_GUARDED_BY(mu) = 0;     // the source whose turn is next
  // The thread has taken a batch and not yet finished it (and the summary after it).
  bool busy ABSL_GUARDED_BY(mu) = false;
  Dropped unreported ABSL_GUARDED_BY(mu), total ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;
};

bool ConsoleWriter::State::StalledLocked() const {
  if (!writing.load(std::memory_order_acquire)) return false;
  int64_t quiet = SteadyNowNs() - last_progress_ns.load(std::memory_order_acquire);
  return quiet >= absl::ToInt64Nanoseconds(options.stall_after);
}

// Errors (EPIPE from a closed console, EIO from a hung-up terminal) drop the output:
// there is nowhere else to put it, and the agent must keep supervising.
void ConsoleWriter::State::WriteAll(int fd, const std::string& data) {
  last_progress_ns.store(SteadyNowNs(), std::memory_order_release);
  writing.store(true, std::memory_order_release);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, std::min(kWriteChunk, data.size() - off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += n;
    last_progress_ns.store(SteadyNowNs(), std::memory_order_release);
  }
  writing.store(false, std::memory_order_release);
}

size_t ConsoleWriter::State::TakeBatch(std::string* batch) {
  size_t n = sources.size();
  for (size_t i = 0; i < n; ++i, next = (next + 1) % n) {
    if (!sources[next].queue.empty()) break;
  }
  Source& s = sources[next];
  while (!s.queue.empty() && batch->size() < kBatchBytes) {
    *batch += s.queue.front();
    s.queue.pop_front();
  }
  size_t index = next;
  next = (next + 1) % n;
  return index;
}

void ConsoleWriter::State::Written(size_t index, size_t bytes) {
  Source& s = sources[index];  // the vector may have grown meanwhile
  s.bytes -= bytes;
  pending -= bytes;
  if (s.full && s.bytes <= options.source_limit / 2) {
    s.full = false;
    uint64_t one = 1;
    // EAGAIN means the counter is already non-zero: the loop will wake anyway.
    [[maybe_unused]] ssize_t r = write(space_fd.get(), &one, sizeof(one));
  }
}

void ConsoleWriter::State::ReportDropped() {
  if (unreported.lines == 0) return;
  std::string line = absl::StrCat("[muster] ", Plural(unreported.lines, "line", "lines"), " (",
                                  Plural(unreported.bytes, "byte", "bytes"),
                                  ") of output dropped while the console was blocked\n");
  unreported = Dropped{};
  mu.Unlock();
  WriteAll(options.summary_fd, line);
  mu.Lock();
}

void ConsoleWriter::State::Run() {
  // Writing worker output is throughput work: never preempt the agent's loop when it
  // hands over lines (SCHED_BATCH keeps the thread's CPU share). Best effort.
  sched_param param{};
  (void)sched_setscheduler(0, SCHED_BATCH, &param);
  mu.Lock();
  for (;;) {
    while (!stop && pending == 0) work_cv.Wait(&mu);
    if (pending == 0 && stop) break;
    std::string batch;
    size_t index = TakeBatch(&batch);
    int fd = sources[index].out_fd;
    busy = true;
    mu.Unlock();
    WriteAll(fd, batch);
    mu.Lock();
    Written(index, batch.size());
    // The console took a batch: it is moving again, say what it missed.
    ReportDropped();
    busy = false;
    if (pending == 0) drained_cv.SignalAll();
  }
  mu.Unlock();
}

absl::StatusOr<std::unique_ptr<ConsoleWriter>> ConsoleWriter::Start(Options options) {
  auto state = std::make_shared<State>(options);
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return ErrnoStatus("eventfd", errno);
  state->space_fd.reset(fd);
  // The thread never takes a signal meant for the agent's signalfd, whatever the caller's
  // mask is: a signal delivered to it would run the default action (death).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  // The thread owns a reference to the state: a write stuck on the console may outlive
  // this object (see the destructor) and ends with the process.
  std::thread thread([state] { state->Run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return std::unique_ptr<ConsoleWriter>(new ConsoleWriter(std::move(state), std::move(thread)));
}

ConsoleWriter::~ConsoleWriter() {
  Close();
  // Drained and closed, the thread is ending: join it (a thread still running at exit
  // costs TSan builds a second). On a stuck console it stays in write() until the
  // process exits.
  if (Drain(absl::Seconds(1))) {
    thread_.join();
  } else {
    thread_.detach();
  }
}

int ConsoleWriter::AddSource(int out_fd, WhenFull when_full) {
  MutexLock lock(&state_->mu);
  state_->sources.push_back(State::Source{out_fd, when_full, {}, 0, false});
  return static_cast<int>(state_->sources.size()) - 1;
}

bool ConsoleWriter::Push(int source, std::string text) {
  State& st = *state_;
  MutexLock lock(&st.mu);
  State::Source& s = st.sources[source];
  if (s.bytes + text.size() > st.options.source_limit &&
      (s.when_full == WhenFull::kDrop || st.StalledLocked())) {
    uint64_t lines = CountLines(text);
    for (Dropped* d : {&st.unreported, &st.total}) {
      d->lines += lines;
      d->bytes += text.size();
    }
    return true;
  }
  s.bytes += text.size();
  st.pending += text.size();
  s.queue.push_back(std::move(text));
  if (s.bytes > st.options.source_limit) s.full = s.when_full == WhenFull::kPushBack;
  st.work_cv.Signal();
  // A stalled console takes no back-pressure: the next Push() over the limit drops.
  return !s.full || st.StalledLocked();
}

bool ConsoleWriter::HasSpace(int source) {
  MutexLock lock(&state_->mu);
  return !state_->sources[source].full || state_->StalledLocked();
}

bool ConsoleWriter::Stalled() {
  MutexLock lock(&state_->mu);
  return state_->StalledLocked();
}

absl::Duration ConsoleWriter::stall_after() const { return state_->options.stall_after; }

int ConsoleWriter::space_fd() const { return state_->space_fd.get(); }

void ConsoleWriter::Close() {
  {
    MutexLock lock(&state_->mu);
    state_->stop = true;
  }
  state_->work_cv.SignalAll();
}

bool ConsoleWriter::Drain(absl::Duration timeout) {
  State& st = *state_;
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  MutexLock lock(&st.mu);
  // Woken by the writer when it drains; the short steps notice a stall, which the writer,
  // stuck in write(), cannot report.
  constexpr auto kStep = std::chrono::milliseconds(20);
  for (;;) {
    if (st.pending == 0 && !st.busy) return true;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline || st.StalledLocked()) return false;
    st.drained_cv.WaitWithTimeout(
        &st.mu, absl::FromChrono(std::min<std::chrono::nanoseconds>(deadline - now, kStep)));
  }
}

ConsoleWriter::Dropped ConsoleWriter::dropped_total() {
  MutexLock lock(&state_->mu);
  return state_->total;
}

}  // namespace muster
