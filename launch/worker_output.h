// WorkerOutput: pumps one worker's stdout and stderr pipes into its per-rank
// log files (raw bytes, as torchrun writes them) and, line by line with a
// prefix such as "[default0]:", into the ConsoleWriter (see LineSplitter for what a
// line is); the last lines of stderr are kept for the report of a failure (OutputTail).
// A partial line is shown after LineSplitter's delay by a timer on the loop,
// so a prompt or a progress bar without a newline appears while the worker waits.
// Registered with the agent's EventLoop; reading pauses while the worker's console
// queue is full (see ConsoleWriter), and resumes on the writer's space signal or, when
// the console is stalled, on a timer after the writer's stall time: the console then
// drops the lines (the per-rank files still get every byte), so a stuck console never
// freezes a worker for good. Not thread-safe: loop thread only.
#ifndef MUSTER_LAUNCH_WORKER_OUTPUT_H_
#define MUSTER_LAUNCH_WORKER_OUTPUT_H_

#include <array>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/event_loop.h"
#include "base/unique_fd.h"
#include "launch/console_writer.h"
#include "launch/line_splitter.h"
#include "launch/output_tail.h"

namespace muster {

struct StreamOptions {
  bool to_console = true;
  std::string file;  // empty: no file
};

// The pipes of a worker's stdout and stderr: the worker gets the write ends, WorkerOutput
// reads the others (Attach). Close-on-exec, blocking.
struct OutputPipes {
  UniqueFd stdout_read, stdout_write, stderr_read, stderr_write;
  static absl::StatusOr<OutputPipes> Create();
};

class WorkerOutput {
 public:
  // Opens the per-rank files and the console sources; nothing is read before Attach.
  static absl::StatusOr<std::unique_ptr<WorkerOutput>> Create(EventLoop* loop,
                                                              ConsoleWriter* console,
                                                              std::string prefix,
                                                              const StreamOptions& out,
                                                              const StreamOptions& err);
  ~WorkerOutput();

  // Starts pumping the worker's stdout and stderr from these read ends (made non-blocking
  // here), once its source has wired the write ends to them (launch/worker_source.h). Once.
  absl::Status Attach(UniqueFd stdout_fd, UniqueFd stderr_fd);
  // Resumes streams that were paused on a full console queue and now have room.
  void ResumeIfRoom();
  // The last lines the worker wrote to stderr (OutputTail::Text), after reading what the
  // pipe holds now: called once the worker has exited, so nothing it wrote is missed.
  std::string StderrTail();
  // Reads whatever is left without blocking (a worker's children may still hold
  // the pipe), flushes partial lines, and unregisters. Idempotent.
  void Finish();

 private:
  struct Stream {
    UniqueFd read_end;
    UniqueFd file;
    int console_source = -1;  // -1: not shown on the console
    LineSplitter splitter;
    EventLoop::TimerId flush_timer = 0;  // 0: none armed
    bool paused = false, open = false;
    bool keeps_tail = false;  // stderr: its last lines go to err_tail_
  };
  WorkerOutput(EventLoop* loop, ConsoleWriter* console, std::string prefix)
      : loop_(loop), console_(console), prefix_(std::move(prefix)) {}
  // Returns false at EOF or on a read error.
  bool Pump(Stream& s, size_t max_reads);
  // Queues `lines` for the console; stops reading `s` when its queue is full.
  void Deliver(Stream& s, std::string lines);
  // Arms the timer that shows `s`'s partial line, unless one is armed or none waits.
  void ArmFlush(Stream& s);
  void FlushPartial(Stream& s);
  // While a stream is paused: checks after the console's stall time whether it must
  // resume (ConsoleWriter::HasSpace is true on a stalled console).
  void ArmStallCheck();
  void CancelStallCheck();
  // An Emit that appends each line, prefixed and ending in '\n', to `out`.
  LineSplitter::Emit AppendTo(std::string* out) const;
  void Close(Stream& s);

  EventLoop* loop_;
  ConsoleWriter* console_;
  std::string prefix_;
  std::array<Stream, 2> streams_;
  OutputTail err_tail_;
  EventLoop::TimerId stall_timer_ = 0;  // 0: none armed
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_WORKER_OUTPUT_H_
