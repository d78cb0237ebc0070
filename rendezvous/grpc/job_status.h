// JobStatusSnapshot: the server's view of one job (DESIGN §4.6), as plain data. The
// server fills it from its rdzv::Job; GetJobStatus (job_status_client.h) returns it to
// `muster status`. No gRPC or protobuf here.
#ifndef MUSTER_RENDEZVOUS_GRPC_JOB_STATUS_H_
#define MUSTER_RENDEZVOUS_GRPC_JOB_STATUS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/core/types.h"

namespace muster::rdzv {

enum class JobPhase { kPending, kRunning, kRestarting, kSucceeded, kFailed };

// "Pending", "Running", "Restarting", "Succeeded", "Failed".
const char* JobPhaseName(JobPhase phase);

struct NodeStatus {
  std::string node_id;
  std::string host;
  std::string address;
  int group_rank = -1;  // -1: waiting for the next round
  int local_world_size = 1;
  absl::Time last_heartbeat = absl::InfinitePast();
  // "Waiting", "Running", "Succeeded", "Failed", "Stopping", "Stopped", "Left".
  std::string state;
  std::string probe;  // the node's GPU probe summary, "" when it did not probe
};

struct JobStatusSnapshot {
  std::string run_id;
  JobPhase phase = JobPhase::kPending;
  int round = 0;
  int restarts_used = 0;
  int max_restarts = 0;
  int min_nodes = 1;
  int max_nodes = 1;
  std::vector<NodeStatus> nodes;       // every live node, by group rank then node id
  std::vector<NodeInfo> participants;  // current round, group-rank order
  std::vector<RestartRecord> history;
  std::optional<Outcome> outcome;     // set once finished; root cause inside
  std::vector<Condition> conditions;  // Created, Running, Restarting, Succeeded, Failed
  std::vector<WorkerStatus> workers;  // current (or last) round, by rank
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_GRPC_JOB_STATUS_H_
