#include "rendezvous/core/types.h"

#include <string_view>

namespace muster::rdzv {

std::string FailureDetail(const Failure& f) {
  if (!f.message.empty()) return f.message;
  std::string_view tail = f.stderr_tail;
  size_t nl = tail.rfind('\n');
  std::string_view last = nl == std::string_view::npos ? tail : tail.substr(nl + 1);
  if (last.size() <= kMaxDetailBytes) return std::string(last);
  size_t keep = kMaxDetailBytes - 3;
  // Cut before a UTF-8 continuation byte, never inside a character.
  while (keep > 0 && (static_cast<unsigned char>(last[keep]) & 0xC0) == 0x80) --keep;
  return std::string(last.substr(0, keep)) + "...";
}

const char* FailureKindName(FailureKind kind) {
  switch (kind) {
    case FailureKind::kWorker:
      return "worker";
    case FailureKind::kHung:
      return "hung";
    case FailureKind::kNodeLost:
      return "node_lost";
    case FailureKind::kPreempted:
      return "preempted";
  }
  return "unknown";
}

const char* NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kWaiting:
      return "Waiting";
    case NodeState::kRunning:
      return "Running";
    case NodeState::kSucceeded:
      return "Succeeded";
    case NodeState::kFailed:
      return "Failed";
    case NodeState::kStopping:
      return "Stopping";
    case NodeState::kStopped:
      return "Stopped";
    case NodeState::kLeft:
      return "Left";
    case NodeState::kExcluded:
      return "Excluded";
    case NodeState::kSpare:
      return "Spare";
    case NodeState::kQuarantined:
      return "Quarantined";
  }
  return "Unknown";
}

std::optional<NodeState> ParseNodeState(std::string_view name) {
  for (NodeState s : kNodeStates) {
    if (name == NodeStateName(s)) return s;
  }
  return std::nullopt;
}

const char* WorkerStateName(WorkerState state) {
  switch (state) {
    case WorkerState::kPending:
      return "Pending";
    case WorkerState::kRunning:
      return "Running";
    case WorkerState::kSucceeded:
      return "Succeeded";
    case WorkerState::kFailed:
      return "Failed";
    case WorkerState::kStopped:
      return "Stopped";
  }
  return "Unknown";
}

}  // namespace muster::rdzv
