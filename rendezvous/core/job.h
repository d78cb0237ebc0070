// Job: the rendezvous state machine of one job (docs/design.md §4.3, §4.4). Pure: no I/O, no
// threads, no clock; every call takes `now` and returns the events to deliver, so it is
// tested with a fake clock and driven by any transport (in-process or gRPC).
//
// Phases: kGathering (nodes join; a round completes at max_nodes at once, or at
// >= min_nodes when last_call_timeout passes; fails with 138 after join_timeout) ->
// kRunning (workers run) -> kStopping (every participant stops its workers and reports
// back with a fresh store port) -> next round, or kFinished (outcome pushed to all).
//
// Restart budget, restart history and outcome are owned here, once for the whole job, so
// every node sees the same TORCHELASTIC_RESTART_COUNT and exits with the same code.
// Membership changes (a node arriving while a round runs, a node lost while >= min_nodes
// remain) start a new round without consuming the budget. Liveness is not the job's: its
// owner calls NodeLost when a node's connection ends (docs/operations/liveness-and-partitions.md
// "muster's own rendezvous (gRPC)"); silence alone never removes a node.
//
// Ranks: hints are honoured (a duplicate is refused naming both nodes; a hint outside
// [0, max_nodes) is refused); nodes without hints keep their previous order across rounds,
// newcomers follow in arrival order (rank_order.h).
//
// Spares (docs/guides/spares.md): a healthy node that a round holding max_nodes has no place
// for is listed as kSpare; a round that re-forms after a participant is lost or excluded
// takes it in (last in the order above), so a fixed-size job keeps its WORLD_SIZE. With
// spec.spares > 0 a node beyond max_nodes + spares is refused at its join.
//
// Status (docs/design.md §4.6): besides phase, history and outcome, the job keeps Kubernetes-style
// conditions (conditions.h) and every worker of the current round: its rank and local rank
// from the round's layout, its pid once the agent reports it (WorkersStarted), and how it
// ended (WorkerEnded, WorkerFailed, WorkersSucceeded). After the outcome, nodes that hang
// up stay listed (state "Left") so the final status still shows who ran what.
//
// Settle window (settle_window.h, docs/reference/exit-codes.md): a failure that would finish a
// round of several nodes (not restartable, or the budget spent) is held for kSettleWindow
// while the round keeps running: the survivors' collectives fail (exit 1) within
// milliseconds of a node's loss, before its owner learns of the loss. A participant lost
// meanwhile makes it a membership change; else the held failure finishes the job as it
// would have at once. Restartable failures with budget left decide at once.
//
// The definitions are split by concept: job.cc (membership: joins, health, preemption and
// drain, losses; deadlines), job_round.cc (rounds, outcome, hangs, the traces of a failed
// round), job_workers.cc (the status of nodes and workers); job_status.h builds the status
// views from a Job. What has state of its own is a class the job holds: the settle window's held
// failure (SettleWindow, settle_window.h), the round's preemption notices (RoundPreemptions,
// round_preemptions.h), the flight recorder dumps collected (TraceRounds, trace_rounds.h)
// and the bad-node memory (BadNodes, bad_nodes.h).
//
// Bad-node memory (bad_nodes.h, docs/guides/health-gate.md "Bad-node memory"): the root
// cause of every restart is counted on its host; a host due for quarantine
// (spec.quarantine_after) is kept out for the rest of the job (kQuarantined, with its
// reasons) once the next round can still form without it (QuarantineDue, job.cc).
//
// Not thread-safe: the owner serialises calls. Both backends own it through
// rendezvous/registry's JobHost (the server's JobRegistry holds a mutex; the etcd
// coordinator runs on its brain thread).
#ifndef MUSTER_RENDEZVOUS_CORE_JOB_H_
#define MUSTER_RENDEZVOUS_CORE_JOB_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/core/bad_nodes.h"
#include "rendezvous/core/conditions.h"
#include "rendezvous/core/hang.h"
#include "rendezvous/core/round_preemptions.h"
#include "rendezvous/core/settle_window.h"
#include "rendezvous/core/straggler.h"
#include "rendezvous/core/trace_rounds.h"
#include "rendezvous/core/types.h"

namespace muster::rdzv {

class Job {
 public:
  enum class Phase { kGathering, kRunning, kStopping, kFinished };

  Job(JobSpec spec, absl::Time now);

  const JobSpec& spec() const { return spec_; }
  Phase phase() const { return phase_; }
  int round() const { return round_; }
  int restarts_used() const { return restarts_used_; }
  // The restart count (TORCHELASTIC_RESTART_COUNT, the agents' "attempt N") of the round
  // running or last run: the budget used when it started.
  int attempt() const { return attempt_; }
  // When the round running or last run started; InfinitePast before the first.
  absl::Time round_started() const { return round_started_; }
  // How long the round running or last run took to form: from the job's creation, the
  // previous round's stop, or a new gathering, to its start (the server's metrics).
  absl::Duration round_formed_in() const { return round_formed_in_; }
  const std::vector<RestartRecord>& history() const { return history_; }
  const std::optional<Outcome>& outcome() const { return outcome_; }
  // Participants of the current round in group-rank order (empty while gathering).
  const std::vector<NodeInfo>& participants() const { return participants_; }
  // Nodes known and alive, including those waiting for the next round.
  std::vector<NodeInfo> Nodes() const;

  // One node as the status shows it.
  struct NodeView {
    NodeInfo info;
    int group_rank = -1;  // -1: not in the current round
    NodeState state = NodeState::kWaiting;
    absl::Time last_seen;
  };
  // Every node (alive, or left after the outcome), by group rank, then waiting ones by
  // node id. O(n log n) for the waiting ones only; participants come in O(n).
  std::vector<NodeView> NodeViews() const;
  // Workers of the current round (or of the last one), by global rank.
  std::vector<WorkerStatus> Workers() const;
  const std::vector<Condition>& conditions() const { return conditions_.all(); }
  // The bad-node memory: root causes by host, and the hosts quarantined.
  const BadNodes& bad_nodes() const { return bad_nodes_; }

  // Continues a job whose owner is gone (the etcd backend's next coordinator): the next
  // round is `round` + 1 and the restart budget used and the history are the previous
  // owner's. `previous_order`: the node ids of the previous owner's last round by group
  // rank; those of them that join keep that order (as survivors do within one owner).
  // The bad-node memory is rebuilt from `history` (BadNodes::Replay). Call before the
  // first Join.
  void ContinueFrom(int round, int restarts_used, std::vector<RestartRecord> history,
                    const std::vector<std::string>& previous_order = {});

  // A node joins (or re-joins with a new node_id after its Pod restarted). Errors, for
  // that node only: InvalidArgument (rank hint conflict or out of range, local_world_size
  // < 1 or > 4096, a spec no job can run), FailedPrecondition (the job has finished).
  // `spec` must equal the job's (run id, nnodes, max_restarts): InvalidArgument naming the
  // field otherwise.
  absl::Status Join(const NodeInfo& node, const JobSpec& spec, absl::Time now,
                    std::vector<Event>* out);
  // The node's health gate (agent/health/health_gate.h) changed its verdict: `excluded`
  // says why it stays out of rounds, "" that it may take part again. An excluded node is
  // live (listed, state kExcluded) but counts toward no round: a gathering waits for
  // another node or its recovery, and the running round goes on. A recovered node arrives
  // as a joiner does (a running round below max_nodes re-forms, uncounted). A participant
  // that is excluded leaves the next round. Unknown nodes are ignored (job.cc).
  void NodeHealth(const std::string& node_id, const std::string& excluded, absl::Time now,
                  std::vector<Event>* out);
  // Status only: the node was heard from (its last_seen). Liveness is the transport's
  // (docs/operations/liveness-and-partitions.md "muster's own rendezvous (gRPC)"): the owner calls
  // NodeLost when a node's connection ends.
  void Heartbeat(const std::string& node_id, absl::Time now);
  // The node's stream closed or it left: dead at once.
  void NodeLost(const std::string& node_id, const std::string& why, absl::Time now,
                std::vector<Event>* out);
  // A local worker of `round` failed on that node (the first failure there; later ones of
  // the same round are ignored). Stale rounds are ignored.
  void WorkerFailed(const std::string& node_id, int round, const Failure& failure, absl::Time now,
                    std::vector<Event>* out);
  // Every local worker of `round` on that node exited 0 (exit barrier arrival).
  void WorkersSucceeded(const std::string& node_id, int round, absl::Time now,
                        std::vector<Event>* out);
  // The node started its local workers of `round` (pids for the status; no events).
  // Stale rounds and unknown local ranks are ignored.
  void WorkersStarted(const std::string& node_id, int round,
                      const std::vector<StartedWorker>& workers, absl::Time now);
  // One local worker of `round` on that node ended (status only; the decision is taken on
  // WorkerFailed / WorkersSucceeded). Stale rounds and unknown local ranks are ignored.
  void WorkerEnded(const std::string& node_id, int round, const EndedWorker& ended, absl::Time now);
  // The node has stopped its workers of `round` and opened a fresh store on `store_port`.
  void WorkersStopped(const std::string& node_id, int round, int store_port, absl::Time now,
                      std::vector<Event>* out);
  // Hang detection (hang.h, job_round.cc): the node's workers of `round` stalled, or made
  // progress again. Once every participant has stalled the round ends as a failure "hung"
  // naming the culprit (conditions' reason "Hung"), restartable as the reports say. Stale
  // rounds are ignored.
  void NodeStalled(const std::string& node_id, int round, const Stall& stall, absl::Time now,
                   std::vector<Event>* out);
  // The node is being preempted (SIGTERM to its agent, a spot notice, `muster drain`;
  // docs/guides/preemption.md): every live node gets kPreempt naming it, so that every worker can
  // checkpoint before anything is stopped. The node then leaves (NodeLost): an elastic job
  // re-forms without it, a job below min_nodes finishes with 143 (SIGTERM's code).
  // NotFound for an unknown node, FailedPrecondition unless a round runs. Idempotent per
  // node (job.cc).
  absl::Status Preempt(const std::string& node_id, const std::string& reason, absl::Time now,
                       std::vector<Event>* out);
  // A node that was being preempted in the round of a previous owner of the job (the etcd
  // backend's coordinator that was lost: ContinueFrom) is gone before it joined this Job,
  // and every other node of that round that is left has joined. Below min_nodes the job
  // ends as a preempted node's loss ends it (143, "NodePreempted"); else nothing: the
  // next round forms without it (job.cc).
  void PreemptedNodeLeft(const Preemption& p, absl::Time now, std::vector<Event>* out);
  // The live node `muster drain` names: by `node_id`, else the one node on `host`.
  // NotFound when none matches, InvalidArgument when several nodes run on `host`; both
  // messages name the fix (job.cc).
  absl::StatusOr<NodeInfo> NodeToDrain(const std::string& node_id, const std::string& host) const;
  // The server stored `node_id`'s flight recorder dumps of `round` under `location`
  // ("HOST:DIR/"; docs/guides/collective-traces.md), or none (`stored.files` empty; `error` says
  // why the server refused them). An empty `location`: nothing was collected (etcd) and
  // `stored.files` are "HOST:PATH"s left on the node. The node hears what is stored so far
  // (kTraces); every node of the round still connected hears it once all have reported
  // (O(nodes) events per round). Idempotent per node and round; the last kMaxTraceRounds
  // rounds are kept for the status (trace_rounds.h).
  void TracesStored(const std::string& node_id, int round, const std::string& location,
                    TraceNode stored, const std::string& error, absl::Time now,
                    std::vector<Event>* out);
  const std::vector<TraceRound>& traces() const { return traces_.all(); }
  static constexpr size_t kMaxTraceRounds = TraceRounds::kMaxRounds;
  // How long a fatal failure of a round of several nodes waits for a loss that would
  // explain it (settle_window.cc says how it was chosen).
  static constexpr absl::Duration kSettleWindow = SettleWindow::kWindow;
  // A fatal failure held for the settle window (held_failure()).
  using HeldFailure = rdzv::HeldFailure;
  // The failure held now, if any. An owner logs HoldNotice once it appears, so that a user
  // reading logs knows why the job ends seconds after a failure.
  const std::optional<HeldFailure>& held_failure() const { return settle_.held(); }
  // The nodes of the running round that announced their preemption (empty otherwise).
  const std::vector<Preemption>& preempting() const { return preemptions_.all(); }
  // Stragglers (straggler.h, job_round.cc): a node of the running round sampled its ranks'
  // stacks. Once every participant has sent a fresh sample they are judged together; when
  // the rank named changes (or clears) every participant gets kStraggler. Stale rounds and
  // nodes outside the round are ignored; a new round starts a new tally.
  void NodeSampled(const std::string& node_id, int round, const StragglerSample& sample,
                   absl::Time now, std::vector<Event>* out);
  const std::optional<StragglerVerdict>& straggler() const { return stragglers_.named(); }
  // Fires due deadlines: progress, last call, join timeout, stop timeout.
  void Tick(absl::Time now, std::vector<Event>* out);
  // When Tick must run next; nullopt when nothing is pending.
  std::optional<absl::Time> NextDeadline() const;

 private:
  struct Node {
    NodeInfo info;
    absl::Time joined_at;
    absl::Time last_seen;      // the node's last message, for the status
    int prev_group_rank = -1;  // order keeper across rounds
    int64_t arrival = 0;
    bool succeeded = false;             // this round's workers all exited 0
    bool stopped = false;               // acked kStopWorkers for this round
    bool failed = false;                // reported a failure this round
    bool left = false;                  // hung up after the outcome; kept for the final status
    bool quarantined = false;           // its host is quarantined (info.excluded says why)
    int rounds_started = 0;             // rounds this node's workers were started in
    std::vector<WorkerStatus> workers;  // this round's, by local rank
    std::optional<Stall> stall;         // its workers stalled this round (NodeStalled)
  };

  static Event MakeEvent(Event::Kind kind, const std::string& node_id, std::string text = "");
  void MaybeCompleteRound(absl::Time now, std::vector<Event>* out);
  void StartRound(absl::Time now, std::vector<Event>* out);
  // The next round's participants by group rank (rank_order.h).
  std::vector<Node*> RoundOrder();
  // What a spare hears: the full round has no place for it (job_round.cc).
  Event SpareEvent(const std::string& node_id) const;
  // "; spare HOST takes its place" when the next round takes spares in, else "".
  std::string SwapInNote();
  // Tells the participants of the round just formed their assignments, and the others
  // that they wait.
  void AnnounceRound(int world_size, std::vector<Event>* out);
  // `cause` is the CamelCase reason of the conditions ("WorkerFailed", "NodeJoined", ...).
  void BeginStopping(const char* cause, const std::string& reason, bool counted,
                     const std::optional<Failure>& failure, absl::Time now,
                     std::vector<Event>* out);
  // The round failed with `failure`: restart while the budget lasts, else finish. `cause`
  // is the conditions' reason (nullptr: "WorkerFailed", "RestartBudgetSpent", ...).
  void FailRound(const char* cause, const Failure& failure, absl::Time now,
                 std::vector<Event>* out);
  // The round's failure `failure` (described by `what`) finishes the job.
  void FinishFailed(const char* cause, const Failure& failure, const std::string& what,
                    absl::Time now, std::vector<Event>* out);
  void MaybeFinishStopping(absl::Time now, std::vector<Event>* out);
  void Finish(const char* cause, Outcome outcome, absl::Time now, std::vector<Event>* out);
  // Marks a worker of `node` ended, unless it already is.
  static void EndWorker(Node& node, int local_rank, int pid, WorkerState state, int code,
                        int signal, const std::string& what);
  // Marks every still pending or running worker of `node` stopped, with `what`.
  static void EndRunningWorkers(Node& node, const std::string& what);
  std::string ProgressText(absl::Time now) const;
  void Touch(Node& node, absl::Time now);
  // Drops `info`'s entry from hinted_ if it is that node's.
  void ForgetHint(const NodeInfo& info);
  // `node_id` by value: callers pass ids that live in structures this function erases.
  void RemoveNode(std::string node_id, const std::string& why, absl::Time now,
                  std::vector<Event>* out);
  bool IsParticipant(const std::string& node_id) const;
  int LiveCount() const { return static_cast<int>(nodes_.size()) - left_count_; }
  // Live nodes that may take part in a round: LiveCount but the excluded ones.
  int EligibleCount() const { return LiveCount() - excluded_count_; }
  // Quarantines every host due for it (bad_nodes_) whose live nodes the next round can do
  // without: EligibleCount() without them >= min_nodes. Returns what it decided in one
  // line for the round's stop reason ("" when nothing is due); `explain`: also say why a
  // due host stays (job.cc).
  std::string QuarantineDue(bool explain, std::vector<Event>* out);
  // A node that may take part (joined, or recovered) arrives: the gathering counts it, a
  // running round below max_nodes re-forms (`cause`: the conditions' reason).
  void Arrive(const NodeInfo& info, const char* cause, absl::Time now, std::vector<Event>* out);

  JobSpec spec_;
  Phase phase_ = Phase::kGathering;
  int round_ = 0;  // number of the round running or last run; first round is 1
  int restarts_used_ = 0;
  int attempt_ = 0;
  absl::Time round_started_ = absl::InfinitePast();
  absl::Duration round_formed_in_;
  int64_t arrivals_ = 0;
  absl::Time gathering_since_;
  std::optional<absl::Time> last_call_;  // set once min_nodes are present
  absl::Time stopping_since_;
  std::map<std::string, Node> nodes_;         // every live node (and, once finished, left ones)
  int left_count_ = 0;                        // nodes_ entries with `left` set
  int excluded_count_ = 0;                    // live nodes_ entries with info.excluded set
  std::map<int, std::string> hinted_;         // rank hint -> node id, for the nodes_ that gave one
  std::map<std::string, int> carried_ranks_;  // ContinueFrom's previous order: id -> group rank
  // Progress that Tick sends at progress_due_ unless a round started before: to every node
  // (progress_to_all_: a small gathering changed since they last heard) or to the joiners of
  // a gathering above kProgressBroadcastLimit nodes that have not heard how far it is.
  std::vector<std::string> progress_owed_;
  bool progress_to_all_ = false;
  std::optional<absl::Time> progress_due_;
  std::vector<NodeInfo> participants_;  // current round, group-rank order
  std::vector<RestartRecord> history_;
  std::optional<Failure> pending_failure_;  // the failure that triggered kStopping
  SettleWindow settle_;                     // kRunning only: a fatal failure in its window
  std::optional<Outcome> outcome_;
  Conditions conditions_;
  RoundPreemptions preemptions_;  // this round's; cleared when a round starts
  TraceRounds traces_;            // by round, the last kMaxTraceRounds
  BadNodes bad_nodes_;            // root causes by host; the hosts quarantined
  StragglerTally stragglers_;     // this round's; cleared when a round starts
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_JOB_H_
