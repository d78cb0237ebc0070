#include "rendezvous/core/types.h"

namespace muster::rdzv {

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
