#include "rendezvous/grpc/job_status.h"

namespace muster::rdzv {

const char* JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kPending:
      return "Pending";
    case JobPhase::kRunning:
      return "Running";
    case JobPhase::kRestarting:
      return "Restarting";
    case JobPhase::kSucceeded:
      return "Succeeded";
    case JobPhase::kFailed:
      return "Failed";
  }
  return "Unknown";
}

}  // namespace muster::rdzv
