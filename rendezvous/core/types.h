// Plain data of the rendezvous (docs/design.md §4.3, §4.4): what agents tell the job and what the
// job tells them. No gRPC or protobuf here; rendezvous/wire converts these to messages. Each
// compares field by field (operator==), so that a round trip is compared whole
// (rendezvous/wire/proto_convert_test.cc).
#ifndef MUSTER_RENDEZVOUS_CORE_TYPES_H_
#define MUSTER_RENDEZVOUS_CORE_TYPES_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/core/straggler.h"
#include "rendezvous/core/traces.h"

namespace muster::rdzv {

// The job's shape and limits; every agent of a job must send the same values (checked).
struct JobSpec {
  std::string run_id = "none";
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;  // one budget for the whole job
  // --spares: live nodes beyond max_nodes the job keeps as hot spares (docs/guides/spares.md);
  // one more is refused at its join. 0: no limit (a node beyond max_nodes waits as a spare).
  int spares = 0;
  bool restart_after_success = false;  // restart policy Always
  absl::Duration join_timeout = absl::Seconds(600);
  absl::Duration last_call_timeout = absl::Seconds(30);
  absl::Duration heartbeat_interval = absl::Seconds(5);
  int heartbeat_misses = 3;
  // How long a node may take to report its workers stopped after kStopWorkers before it
  // is declared lost (agents stop within --shutdown-timeout plus reaping).
  absl::Duration stop_timeout = absl::Seconds(60);
  // Bad-node memory (bad_nodes.h): a host that was the root cause of this many failed
  // attempts is quarantined when the next round can form without it; 0: never. The agent
  // sends --quarantine-after (default 2).
  int quarantine_after = 0;

  bool operator==(const JobSpec&) const = default;
};

// One agent (one incarnation of it: a restarted Pod is a new node).
struct NodeInfo {
  std::string node_id;  // unique per agent process, e.g. "host:pid:random"
  std::string host;     // hostname, for people
  std::string address;  // checked address workers of other nodes can reach (MASTER_ADDR)
  int rank_hint = -1;   // --node-rank / operator env; -1: none
  int local_world_size = 1;
  int store_port = 0;  // this node's fresh c10d store for the next round
  // The agent writes a hostfile (--hostfile, debug mode): its assignments list every node.
  bool wants_node_list = false;
  // The agent's GPU probe in one line, for the job status ("" when it did not probe).
  // Sent with Join only; round assignments leave it out.
  std::string probe;
  // The worker command line and the per-rank log directory ("" when the workers' output
  // goes to the console only), for the job status. Sent with Join only, as the probe.
  std::string command;
  std::string log_dir;
  // How nothing a worker starts outlives the job there (launch/containment.h: "cgroup
  // /sys/fs/cgroup/...", "session (...), under a supervisor"). Sent with Join only.
  std::string containment;
  // Why this node's health gate keeps it out of rounds ("" when it may take part;
  // agent/health/health_gate.h). Sent with Join, then changed by Job::NodeHealth.
  std::string excluded;

  bool operator==(const NodeInfo&) const = default;
};

// Why a failure ended its round, as the job judges it: the vocabulary that crosses the
// rendezvous (both backends carry it), the agent and the status API. `what` stays the
// text for people; decisions read the kind. FailureKindName is its only spelling.
enum class FailureKind {
  kWorker,  // the worker ended on its own: an exit code or a signal (`what` says which)
  kHung,    // the job judged the round hung and named this rank (core/job_round.cc)
  // Not a worker's doing (the job ends with a transient code, 138 or 143): a node was lost
  // and fewer than --nnodes' minimum are left, or a preempted node left.
  kNodeLost,
  kPreempted,
};

// "worker", "hung", "node_lost", "preempted": the root cause's "kind" in --status-file and
// `muster status --json`.
const char* FailureKindName(FailureKind kind);

struct Failure {
  FailureKind kind = FailureKind::kWorker;
  std::string node_id;
  std::string host;
  int rank = -1;  // global rank of the failed worker
  int local_rank = -1;
  int pid = 0;
  int code = 0;         // exit code or 128+signal
  std::string what;     // "exit 1", "signal 9 (SIGKILL)", "node lost: stream closed", ...
  std::string message;  // error.json message, may be empty
  // Without a message: the worker's last lines of stderr (<= 20 lines, <= 4 KB, printable
  // UTF-8), else "". Kept in the outcome's root cause only, not in history or events.
  std::string stderr_tail;
  bool restartable = false;  // the agent's restart policy says so

  bool operator==(const Failure&) const = default;
};

// Why the worker failed, in one line for a reason or a log: the error file's message, else
// the last line of its stderr (at most kMaxDetailBytes of it), else "".
inline constexpr size_t kMaxDetailBytes = 256;
std::string FailureDetail(const Failure& f);

// A round's layout as one node sees it.
struct Assignment {
  int round = 0;
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT: job-wide restarts used
  int group_rank = 0;
  int group_world_size = 1;
  int rank_base = 0;  // global rank of this node's local rank 0
  int world_size = 1;
  std::string master_addr;  // group rank 0's address
  int master_port = 0;      // group rank 0's store port of this round
  // All participants ordered by group rank (for hostfiles), for a node that asked
  // (NodeInfo::wants_node_list) only: a round costs O(n) bytes, not O(n^2).
  std::vector<NodeInfo> nodes;

  bool operator==(const Assignment&) const = default;
};

struct Outcome {
  int exit_code = 0;                  // 0, the root cause's code, or 138
  std::optional<Failure> root_cause;  // absent on success
  std::string reason;                 // one line for logs

  bool operator==(const Outcome&) const = default;
};

struct RestartRecord {
  int round = 0;       // the round that ended
  int attempt = 0;     // its restart count (TORCHELASTIC_RESTART_COUNT; the agents' "attempt")
  absl::Time started;  // when the round that ended started
  absl::Time time;
  std::string reason;    // "worker failure", "node joined", "node lost"
  bool counted = false;  // consumed the restart budget
  std::optional<Failure> failure;

  bool operator==(const RestartRecord&) const = default;
};

// One local worker an agent has just started (docs/design.md §4.6: the job shows pids).
struct StartedWorker {
  int local_rank = 0;
  int rank = -1;  // global rank
  int pid = 0;
  // How its agent started it, as the agent names it ("exec", "warm": launch/worker_source.h),
  // and why it was exec'd where --warm-start asked for a fork. Shown, never compared.
  std::string start;
  std::string fallback;

  bool operator==(const StartedWorker&) const = default;
};

// One local worker that ended, for any reason (its own exit, or stopped by its agent).
struct EndedWorker {
  int local_rank = 0;
  int pid = 0;
  int code = 0;    // exit code, or 128+signal, or 126/127 when it could not start
  int signal = 0;  // the killing signal; 0 when it exited
  std::string what;
  bool stopped = false;  // it ended while its agent was stopping the group

  bool operator==(const EndedWorker&) const = default;
};

// A node of a job as its status shows it (Job::NodeView, NodeStatus, the server's metrics).
enum class NodeState {
  kWaiting,    // alive, not in the current round
  kRunning,    // in the running round
  kSucceeded,  // its workers exited 0 (waiting at the exit barrier, or done)
  kFailed,     // a worker of it failed
  kStopping,   // the round is stopping; this node has not reported its workers stopped
  kStopped,    // its workers are stopped
  kLeft,       // gone after the outcome
  kExcluded,   // alive, kept out of rounds by its health gate (NodeInfo::excluded says why)
  kSpare,      // alive and healthy, out of a round that is full: takes a lost node's place
  // alive, kept out for the rest of the job by the bad-node memory (bad_nodes.h;
  // NodeInfo::excluded says why)
  kQuarantined,
};

// Every state, in the order above (metrics export one series per state).
inline constexpr std::array<NodeState, 10> kNodeStates = {
    NodeState::kWaiting,  NodeState::kRunning,    NodeState::kSucceeded, NodeState::kFailed,
    NodeState::kStopping, NodeState::kStopped,    NodeState::kLeft,      NodeState::kExcluded,
    NodeState::kSpare,    NodeState::kQuarantined};

// "Waiting", "Running", "Succeeded", "Failed", "Stopping", "Stopped", "Left", "Excluded", "Spare",
// "Quarantined": the names
// `muster status` and the JobStatus service show (the service carries the name).
const char* NodeStateName(NodeState state);
// The state NodeStateName(state) names, if any.
std::optional<NodeState> ParseNodeState(std::string_view name);

enum class WorkerState {
  kPending,    // the round is formed; its agent has not reported the pid yet
  kRunning,    //
  kSucceeded,  // exited 0
  kFailed,     // ended non-zero on its own
  kStopped,    // ended because its agent stopped the group
};

// "Pending", "Running", "Succeeded", "Failed", "Stopped".
const char* WorkerStateName(WorkerState state);

// One worker of the current (or, once finished, the last) round as the job knows it.
struct WorkerStatus {
  std::string node_id;
  std::string host;
  int group_rank = -1;
  int rank = -1;
  int local_rank = 0;
  int pid = 0;  // 0: not reported (yet)
  WorkerState state = WorkerState::kPending;
  int code = 0;    // valid once ended
  int signal = 0;  // valid once ended
  std::string what;
  int restarts = 0;      // rounds this node's workers were started in before this one
  std::string start;     // StartedWorker::start; empty until reported (or an older agent)
  std::string fallback;  // StartedWorker::fallback

  bool operator==(const WorkerStatus&) const = default;
};

// A Kubernetes-style condition of the job (as seeds/001's DeepSpeedJob status):
// last_transition moves only when `status` flips; reason and message may change without.
struct Condition {
  std::string type;     // "Created", "Running", "Restarting", "Succeeded", "Failed"
  bool status = false;  //
  std::string reason;   // CamelCase, for machines: "RoundStarted", "WorkerFailed", ...
  std::string message;  // one line for people
  absl::Time last_transition;

  bool operator==(const Condition&) const = default;
};

// Something the job tells one node.
struct Event {
  enum class Kind {
    kProgress,      // still gathering; `text` says how far
    kRoundStarted,  // `assignment`: start workers
    kStopWorkers,   // `text`: why; stop local workers, then ReportStopped
    kFinished,      // `outcome`: stop workers if any, exit with outcome.exit_code
    // `text`: why; a node of the job is being preempted (`preempted_node`,
    // docs/guides/preemption.md): deliver the notice to the local workers, let them exit on their
    // own
    kPreempt,
    // `traces`: flight recorder dumps of a failed round stored on the server (traces.h)
    kTraces,
    // `straggler`: the job named the rank the others wait for, or cleared it (straggler.h)
    kStraggler,
  };
  Kind kind = Kind::kProgress;
  std::string node_id;  // recipient
  std::string text;
  bool spare = false;              // kProgress: the node is a spare (docs/guides/spares.md)
  Assignment assignment;           // kRoundStarted
  Outcome outcome;                 // kFinished
  std::optional<Failure> failure;  // kStopWorkers: the failure that caused it, if any
  bool counted = false;            // kStopWorkers: the restart consumes the budget
  std::string preempted_node;      // kPreempt: the node id being preempted
  std::string preempted_host;      // kPreempt: its host, for people
  TracesSummary traces;            // kTraces
  // kProgress: the job quarantined this node for the rest of the job (bad_nodes.h): why
  // ("quarantined: root cause of N failed attempts (...)"); "" otherwise.
  std::string quarantined;
  StragglerVerdict straggler;  // kStraggler

  bool operator==(const Event&) const = default;
};

// A node of the running round that announced its preemption (Job::Preempt).
struct Preemption {
  std::string node_id;
  std::string host;
  std::string reason;  // "agent received SIGTERM", the preempt file's first line, ...
  absl::Time since;

  bool operator==(const Preemption&) const = default;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_TYPES_H_
