// JobStatusSnapshot: one job as its status shows it (docs/design.md §4.6), as plain data, and
// JobStatusOf, which builds it from the job's rdzv::Job. Whatever carries it (the gRPC
// JobStatus service: rendezvous/wire/proto_convert; GetJobStatus in
// rendezvous/grpc/job_status_client.h for `muster status`) converts it; no transport here.
#ifndef MUSTER_RENDEZVOUS_CORE_JOB_STATUS_H_
#define MUSTER_RENDEZVOUS_CORE_JOB_STATUS_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/core/job.h"
#include "rendezvous/core/types.h"

namespace muster::rdzv {

// kPreempting: a round runs and a node of it announced its preemption (docs/guides/preemption.md);
// the workers are checkpointing before the node leaves.
enum class JobPhase { kPending, kRunning, kRestarting, kSucceeded, kFailed, kPreempting };

// Every phase, in the order above (metrics export one series per phase).
inline constexpr std::array<JobPhase, 6> kJobPhases = {
    JobPhase::kPending,   JobPhase::kRunning, JobPhase::kRestarting,
    JobPhase::kSucceeded, JobPhase::kFailed,  JobPhase::kPreempting};

// "Pending", "Running", "Restarting", "Succeeded", "Failed", "Preempting".
const char* JobPhaseName(JobPhase phase);

struct NodeStatus {
  std::string node_id;
  std::string host;
  std::string address;
  int group_rank = -1;  // -1: waiting for the next round
  int local_world_size = 1;
  absl::Time last_heartbeat = absl::InfinitePast();
  NodeState state = NodeState::kWaiting;
  std::string probe;        // the node's GPU probe summary, "" when it did not probe
  std::string command;      // the workers' command line
  std::string log_dir;      // per-rank logs, "" when the output goes to the console only
  std::string containment;  // the containment mode in force there (NodeInfo::containment)
  std::string excluded;     // kExcluded: why its health gate keeps it out (NodeInfo::excluded)

  bool operator==(const NodeStatus&) const = default;
};

struct JobStatusSnapshot {
  std::string run_id;
  JobPhase phase = JobPhase::kPending;
  int round = 0;
  int attempt = 0;  // the round's restart count: the agents' "attempt N"
  absl::Time round_started = absl::InfinitePast();  // InfinitePast before the first round
  int restarts_used = 0;
  int max_restarts = 0;
  int min_nodes = 1;
  int max_nodes = 1;
  std::vector<NodeStatus> nodes;       // every live node, by group rank then node id
  std::vector<NodeInfo> participants;  // current round, group-rank order
  std::vector<RestartRecord> history;
  std::optional<Outcome> outcome;             // set once finished; root cause inside
  std::vector<Condition> conditions;          // Created, Running, Restarting, Succeeded, Failed
  std::vector<WorkerStatus> workers;          // current (or last) round, by rank
  std::vector<Preemption> preempting;         // nodes of the running round being preempted
  std::vector<TraceRound> traces;             // flight recorder dumps collected, by round
  std::optional<StragglerVerdict> straggler;  // the rank named (straggler.h), while one is

  bool operator==(const JobStatusSnapshot&) const = default;
};

// One job of the server's list (JobStatus.List): its status' header, no nodes or workers.
struct JobSummary {
  std::string run_id;
  JobPhase phase = JobPhase::kPending;
  int round = 0;
  int restarts_used = 0;
  int max_restarts = 0;
  int nodes = 0;  // live nodes
  int min_nodes = 1;
  int max_nodes = 1;
  std::optional<Outcome> outcome;

  bool operator==(const JobSummary&) const = default;
};

// The phase a job's status shows: Pending before its first round, Restarting between
// rounds, Succeeded or Failed by its outcome's exit code.
JobPhase PhaseOf(const Job& job);

// Copies `job`'s status in O(nodes + workers).
JobStatusSnapshot JobStatusOf(const Job& job);

// `job`'s summary, in O(nodes).
JobSummary JobSummaryOf(const Job& job);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_JOB_STATUS_H_
