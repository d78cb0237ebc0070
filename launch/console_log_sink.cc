#include "launch/console_log_sink.h"

#include <unistd.h>

#include <mutex>
#include <string>
#include <utility>

#include "base/logging.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

class ConsoleLogSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ConsoleLogSink(std::shared_ptr<ConsoleWriter> console)
      : console_(std::move(console)),
        source_(console_->AddSource(2, ConsoleWriter::WhenFull::kDrop)) {}

  // See FlushConsoleLog.
  bool Finish(absl::Duration timeout) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!console_) return true;
    if (!console_->Drain(timeout)) return false;
    console_.reset();  // the last reference: joins the writer thread, idle now
    return true;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    if (console_) {
      console_->Push(source_, std::string(line.data(), line.size()));
      return;
    }
    // After Finish: as InitLogging's sink does. EINTR and short writes are not retried:
    // a line logged this late is best effort.
    [[maybe_unused]] ssize_t n = write(2, line.data(), line.size());
  }
  // spdlog flushes after every line (flush_on(trace)): queuing is all there is to do.
  void flush_() override {}

 private:
  std::shared_ptr<ConsoleWriter> console_;
  int source_;
};

}  // namespace

void LogThroughConsole(std::shared_ptr<ConsoleWriter> console) {
  SetLogSink(std::make_shared<ConsoleLogSink>(std::move(console)));
}

bool FlushConsoleLog(absl::Duration timeout) {
  for (const spdlog::sink_ptr& sink : spdlog::default_logger()->sinks()) {
    if (auto* ours = dynamic_cast<ConsoleLogSink*>(sink.get())) {
      return ours->Finish(timeout);
    }
  }
  return true;
}

}  // namespace muster
