#include "agent/lifecycle/failure_report.h"

#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/diagnostics/flight_recorder.h"
#include "base/exit_codes.h"
#include "base/log_format.h"
#include "base/wire_values.h"
#include "launch/error_file.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// The first `max` bytes of `text`, cut before a character, never inside one.
std::string_view HeadOf(std::string_view text, size_t max) {
  if (text.size() <= max) return text;
  while (max > 0 && (static_cast<unsigned char>(text[max]) & 0xC0) == 0x80) --max;
  return text.substr(0, max);
}

}  // namespace

rdzv::Failure StuckFailure(const std::vector<StuckProcess>& stuck, const rdzv::NodeInfo& node) {
  const std::string what =
      absl::StrCat(stuck.size() == 1 ? "a process" : "processes", " of the job survived SIGKILL (",
                   StuckProcessesLine(stuck), ")");
  return rdzv::Failure{.kind = rdzv::FailureKind::kNodeLost,
                       .node_id = node.node_id,
                       .host = node.host,
                       .rank = stuck.empty() ? -1 : stuck.front().rank,
                       .local_rank = stuck.empty() ? -1 : stuck.front().local_rank,
                       .pid = stuck.empty() ? 0 : stuck.front().pid,
                       .code = exit_code::kTransient,
                       .what = ToValidUtf8(what)};
}

rdzv::Failure FailureOf(const WorkerExit& e, const rdzv::NodeInfo& node, bool restartable) {
  std::string message = e.error ? ToValidUtf8(e.error->message) : "";
  std::string tail = message.empty() ? ToValidUtf8(e.stderr_tail) : "";
  return rdzv::Failure{.node_id = node.node_id,
                       .host = node.host,
                       .rank = e.placement.rank,
                       .local_rank = e.placement.local_rank,
                       .pid = e.pid,
                       .code = e.code,
                       .what = ToValidUtf8(e.what + FlightRecorderNote(e.dir)),
                       .message = std::move(message),
                       .stderr_tail = std::move(tail),
                       .restartable = restartable};
}

std::string FailedWorkerLine(const rdzv::Failure& f) {
  std::string line = absl::StrCat("rank ", f.rank, " (local_rank ", f.local_rank, ", pid ", f.pid,
                                  ", host ", f.host, ") failed: ", f.what);
  if (std::string detail = rdzv::FailureDetail(f); !detail.empty()) {
    absl::StrAppend(&line, ": ", detail);
  }
  return line;
}

std::string StderrBlock(int rank, const std::string& host, const std::string& stderr_tail,
                        bool hung) {
  if (stderr_tail.empty()) return "";
  // A hang's root cause carries every rank's stack by group (rendezvous/core/hang.h) there.
  std::string block =
      hung ? std::string("every rank by stack when the job hung:")
           : absl::StrCat("last lines of rank ", rank, "'s stderr (host ", host, "):");
  std::string_view rest = stderr_tail;
  while (true) {
    size_t nl = rest.find('\n');
    block += "\n  ";
    block.append(rest.substr(0, nl));
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return block;
}

std::string StderrBlock(const rdzv::Failure& f) {
  return StderrBlock(f.rank, f.host, f.stderr_tail, f.kind == rdzv::FailureKind::kHung);
}

std::string TerminationLogText(const std::string& summary, const std::string& block) {
  const size_t max = kTerminationLogBytes - 1;  // WriteTerminationLog ends it with '\n'
  std::string text(summary.size() <= max ? std::string_view(summary) : HeadOf(summary, max - 3));
  if (text.size() < summary.size()) text += "...";
  size_t nl = block.find('\n');
  std::string_view heading = std::string_view(block).substr(0, nl);
  if (block.empty() || text.size() + 1 + heading.size() > max) return text;
  std::vector<std::string_view> lines;  // the last lines that fit, last first
  size_t bytes = text.size() + 1 + heading.size();
  std::string_view rest = nl == std::string::npos ? "" : std::string_view(block).substr(nl + 1);
  while (!rest.empty()) {
    size_t cut = rest.rfind('\n');
    std::string_view line = cut == std::string_view::npos ? rest : rest.substr(cut + 1);
    if (bytes + 1 + line.size() > max) break;
    bytes += 1 + line.size();
    lines.push_back(line);
    rest = cut == std::string_view::npos ? "" : rest.substr(0, cut);
  }
  text.reserve(bytes);
  text += '\n';
  text.append(heading);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    text += '\n';
    text.append(*it);
  }
  return text;
}

void WriteRootCauseErrorFile(const std::map<std::string, std::string>& agent_env,
                             const rdzv::Outcome& o) {
  auto it = agent_env.find("TORCHELASTIC_ERROR_FILE");
  if (o.exit_code == 0 || !o.root_cause || it == agent_env.end() || it->second.empty()) {
    return;
  }
  const rdzv::Failure& f = *o.root_cause;
  // torch's record has a message and a call stack: without an error file of the worker's,
  // the last line of its stderr and its last lines stand in for them.
  std::string message = !f.message.empty() ? f.message
                        : f.stderr_tail.empty()
                            ? f.what
                            : absl::StrCat(f.what, ": ", rdzv::FailureDetail(f));
  WorkerError err{std::move(message), f.stderr_tail, absl::ToUnixSeconds(absl::Now())};
  absl::Status st = WriteAgentErrorFile(it->second, err, o.exit_code);
  if (!st.ok()) spdlog::warn("cannot write TORCHELASTIC_ERROR_FILE: {}", st.message());
}

int FailedJobExitCode(const rdzv::Outcome& outcome, std::optional<int> fatal) {
  if (!fatal || !outcome.root_cause) return outcome.exit_code;
  switch (outcome.root_cause->kind) {
    case rdzv::FailureKind::kWorker:
    case rdzv::FailureKind::kHung:
      return *fatal;
    case rdzv::FailureKind::kNodeLost:
    case rdzv::FailureKind::kPreempted:
      break;
  }
  return outcome.exit_code;
}

}  // namespace muster
