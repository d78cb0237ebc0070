#include "launch/worker_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/errno_status.h"
#include "base/log_format.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {
constexpr size_t kReadChunk = 64 * 1024;
}  // namespace

absl::StatusOr<OutputPipes> OutputPipes::Create() {
  OutputPipes p;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
  p.stdout_read.reset(fds[0]);
  p.stdout_write.reset(fds[1]);
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
  p.stderr_read.reset(fds[0]);
  p.stderr_write.reset(fds[1]);
  return p;
}

absl::StatusOr<std::unique_ptr<WorkerOutput>> WorkerOutput::Create(EventLoop* loop,
                                                                   ConsoleWriter* console,
                                                                   std::string prefix,
                                                                   const StreamOptions& out,
                                                                   const StreamOptions& err) {
  std::unique_ptr<WorkerOutput> w(new WorkerOutput(loop, console, std::move(prefix)));
  const StreamOptions* options[2] = {&out, &err};
  for (int i = 0; i < 2; ++i) {
    Stream& s = w->streams_[i];
    if (!options[i]->file.empty()) {
      int fd = open(options[i]->file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) return ErrnoStatus("open " + options[i]->file, errno);
      s.file.reset(fd);
    }
    s.keeps_tail = i == 1;
    if (options[i]->to_console) s.console_source = console->AddSource(i == 0 ? 1 : 2);
  }
  return w;
}

WorkerOutput::~WorkerOutput() { Finish(); }

absl::Status WorkerOutput::Attach(UniqueFd stdout_fd, UniqueFd stderr_fd) {
  UniqueFd* fds[2] = {&stdout_fd, &stderr_fd};
  for (int i = 0; i < 2; ++i) {
    Stream& s = streams_[i];
    s.read_end = std::move(*fds[i]);
    int flags = fcntl(s.read_end.get(), F_GETFL);
    if (flags < 0 || fcntl(s.read_end.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
      return ErrnoStatus("fcntl(O_NONBLOCK)", errno);
    }
    absl::Status st = loop_->Add(s.read_end.get(), EPOLLIN, [this, i](uint32_t) {
      Stream& stream = streams_[i];
      if (!Pump(stream, 4)) Close(stream);
    });
    if (!st.ok()) return st;
    s.open = true;
  }
  return absl::OkStatus();
}

bool WorkerOutput::Pump(Stream& s, size_t max_reads) {
  char buf[kReadChunk];
  for (size_t i = 0; i < max_reads; ++i) {
    ssize_t n = read(s.read_end.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return false;  // a read error: give up on this stream
      break;                              // drained for now
    }
    if (n == 0) return false;
    std::string_view data(buf, n);
    if (s.keeps_tail) err_tail_.Append(data);
    if (s.file.valid()) {
      size_t off = 0;
      while (off < data.size()) {
        ssize_t w = write(s.file.get(), data.data() + off, data.size() - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          spdlog::warn("cannot write worker log file: {}", strerror(errno));
          s.file.reset();
          break;
        }
        off += w;
      }
    }
    if (s.console_source < 0) continue;
    std::string lines;
    s.splitter.Feed(data, EventLoop::Now(), AppendTo(&lines));
    if (!lines.empty()) Deliver(s, std::move(lines));
    if (s.paused) break;
  }
  ArmFlush(s);
  return true;
}

LineSplitter::Emit WorkerOutput::AppendTo(std::string* out) const {
  return [this, out](std::string_view line) {
    out->append(prefix_);
    out->append(line);
    out->push_back('\n');
  };
}

void WorkerOutput::Deliver(Stream& s, std::string lines) {
  if (console_->Push(s.console_source, std::move(lines)) || s.paused) return;
  // Console queue full: stop reading this stream; the worker blocks in write().
  s.paused = true;
  loop_->Remove(s.read_end.get());
  ArmStallCheck();
}

void WorkerOutput::ArmStallCheck() {
  if (stall_timer_ != 0) return;
  stall_timer_ = loop_->AddTimer(EventLoop::Now() + console_->stall_after(), [this] {
    stall_timer_ = 0;
    ResumeIfRoom();
    for (const Stream& s : streams_) {
      if (s.paused && s.open) return ArmStallCheck();
    }
  });
}

void WorkerOutput::CancelStallCheck() {
  if (stall_timer_ != 0) loop_->CancelTimer(stall_timer_);
  stall_timer_ = 0;
}

void WorkerOutput::ArmFlush(Stream& s) {
  absl::Time deadline = s.splitter.flush_deadline();
  if (s.flush_timer != 0 || deadline == absl::InfiniteFuture()) return;
  s.flush_timer = loop_->AddTimer(deadline, [this, &s] { FlushPartial(s); });
}

void WorkerOutput::FlushPartial(Stream& s) {
  s.flush_timer = 0;
  std::string lines;
  s.splitter.FlushDueAt(EventLoop::Now(), AppendTo(&lines));
  if (!lines.empty()) Deliver(s, std::move(lines));
  // A line completed since the timer was armed and a newer partial waits: its own deadline.
  ArmFlush(s);
}

void WorkerOutput::ResumeIfRoom() {
  for (int i = 0; i < 2; ++i) {
    Stream& s = streams_[i];
    if (!s.paused || !s.open || !console_->HasSpace(s.console_source)) continue;
    s.paused = false;
    absl::Status st = loop_->Add(s.read_end.get(), EPOLLIN, [this, i](uint32_t) {
      if (!Pump(streams_[i], 4)) Close(streams_[i]);
    });
    if (!st.ok()) spdlog::warn("cannot resume worker output: {}", st.ToString());
  }
}

void WorkerOutput::Close(Stream& s) {
  if (!s.open) return;
  s.open = false;
  loop_->Remove(s.read_end.get());
  if (s.flush_timer != 0) loop_->CancelTimer(s.flush_timer);
  s.flush_timer = 0;
  if (s.console_source >= 0) {
    std::string rest;
    s.splitter.Finish(AppendTo(&rest));
    if (!rest.empty()) console_->Push(s.console_source, std::move(rest));
  }
  s.read_end.reset();
  s.file.reset();
}

std::string WorkerOutput::StderrTail() {
  Stream& s = streams_[1];
  // Bounded as Finish: a child of the worker may still be writing.
  if (s.open && !Pump(s, 16)) Close(s);
  return err_tail_.Text();
}

void WorkerOutput::Finish() {
  for (Stream& s : streams_) {
    if (!s.open) continue;
    // Bounded: at most 16 chunks (1 MiB) of what is already in the pipe.
    Pump(s, 16);
    Close(s);
  }
  CancelStallCheck();  // after the last Pump, which may have paused a stream again
}

}  // namespace muster
