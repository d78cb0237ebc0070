// Job (job.h): rounds and the outcome. A round forms (RankOrder decides who and in which
// order) and runs; a failure, a success or a change of members stops it, and the job
// either starts the next round once every participant has stopped its workers, gathers
// again, or finishes with the outcome every node exits with. A round whose every node
// stalled fails as hung (NodeStalled). After a failed round the nodes
// report the flight recorder dumps they uploaded (TracesStored; kept by TraceRounds) and
// hear what is stored.
#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/exit_codes.h"
#include "base/plural.h"
#include "rendezvous/core/hang.h"
#include "rendezvous/core/job.h"
#include "rendezvous/core/rank_order.h"

namespace muster::rdzv {

void Job::WorkerFailed(const std::string& node_id, int round, const Failure& failure,
                       absl::Time now, std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || phase_ != Phase::kRunning || round != round_) return;
  if (it->second.failed) return;
  it->second.failed = true;
  Touch(it->second, now);
  // The signal is not in a Failure; WorkerEnded (sent first by agents) carries it.
  EndWorker(it->second, failure.local_rank, failure.pid, WorkerState::kFailed, failure.code, 0,
            failure.what);
  // Where it happened is the node's as it joined, not what the report says: the bad-node
  // memory counts against that host, and a report's empty or stale host must not move it.
  Failure reported = failure;
  reported.node_id = node_id;
  reported.host = it->second.info.host;
  FailRound(nullptr, reported, now, out);
}

void Job::FailRound(const char* cause, const Failure& failure, absl::Time now,
                    std::vector<Event>* out) {
  // A fatal failure is held (settle_window.h): the first is the root cause, later ones of the
  // round are its consequences.
  if (settle_.holding()) return;
  std::string what =
      absl::StrCat("rank ", failure.rank, " on ", failure.host, " failed: ", failure.what);
  if (std::string detail = FailureDetail(failure); !detail.empty()) {
    absl::StrAppend(&what, ": ", detail);
  }
  // The stderr lines go with the outcome only: a job that restarts a thousand times keeps
  // a thousand history records, and the other nodes need no more than `what` to restart.
  Failure brief = failure;
  brief.stderr_tail.clear();
  if (failure.restartable && restarts_used_ < spec_.max_restarts) {
    ++restarts_used_;
    std::string reason = absl::StrCat(what, "; restarting (", restarts_used_, " of ",
                                      spec_.max_restarts, " restarts used)");
    // The root cause counts against its host; one due now leaves before the next round.
    if (bad_nodes_.Record(round_, failure)) {
      if (std::string q = QuarantineDue(/*explain=*/true, out); !q.empty()) {
        absl::StrAppend(&reason, "; ", q);
      }
    }
    BeginStopping(cause != nullptr ? cause : "WorkerFailed", reason, /*counted=*/true, brief, now,
                  out);
    return;
  }
  if (settle_.Hold(cause, failure, what, participants_.size(), now)) return;
  FinishFailed(cause, failure, what, now, out);
}

void Job::FinishFailed(const char* cause, const Failure& failure, const std::string& what,
                       absl::Time now, std::vector<Event>* out) {
  std::string why = failure.restartable
                        ? absl::StrCat("restart budget spent (", restarts_used_, " of ",
                                       spec_.max_restarts, " restarts used)")
                        : std::string("not restartable");
  // No history record: the history lists restarts that happened; this failure is the
  // outcome's root cause.
  // Every agent exits with this code: a failure must never read as success (a report with
  // code 0, or 256 that the exit status truncates to 0; found by tests/fuzz/rendezvous_fuzz).
  int code = failure.code >= 1 && failure.code <= 255 ? failure.code : 1;
  Finish(cause != nullptr      ? cause
         : failure.restartable ? "RestartBudgetSpent"
                               : "NotRestartable",
         Outcome{.exit_code = code, .root_cause = failure, .reason = absl::StrCat(what, "; ", why)},
         now, out);
}

// Hang detection's job-wide part (hang.h). A node reports when none of its workers has used
// CPU for the hang timeout, with its ranks' stacks; once every participant of the round has,
// the round fails as "hung" and JudgeHang names the culprit.
void Job::NodeStalled(const std::string& node_id, int round, const Stall& stall, absl::Time now,
                      std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || phase_ != Phase::kRunning || round != round_) return;
  Touch(it->second, now);
  if (!stall.stalled) {
    it->second.stall.reset();
    return;
  }
  it->second.stall = stall;
  std::vector<NodeStacks> stacks;
  for (size_t i = 0; i < participants_.size(); ++i) {
    const Node& n = nodes_.at(participants_[i].node_id);
    if (n.succeeded) continue;  // its workers exited 0: waiting at the exit barrier
    if (!n.stall) return;       // a node still makes progress: slow, not hung
    stacks.push_back(NodeStacks{.node_id = n.info.node_id,
                                .host = n.info.host,
                                .group_rank = static_cast<int>(i),
                                .ranks = n.stall->ranks});
  }
  HangVerdict v = JudgeHang(stacks);
  Node& culprit = nodes_.count(v.node_id) ? nodes_.at(v.node_id) : it->second;
  culprit.failed = true;
  EndWorker(culprit, v.local_rank, v.pid, WorkerState::kFailed, 0, 0, "hung");
  // A hang is the agents' decision to restart or not (--hang-action); 138 says "worth a
  // restart" to whatever runs the agents, 1 says it is not.
  const bool restartable = stall.restartable;
  Failure f{.kind = FailureKind::kHung,
            .node_id = culprit.info.node_id,
            .host = culprit.info.host,
            .rank = v.rank,
            .local_rank = v.local_rank,
            .pid = v.pid,
            .code = restartable ? exit_code::kTransient : 1,
            .what = "hung",
            .message = v.line,
            .stderr_tail = v.groups,
            .restartable = restartable};
  FailRound("Hung", f, now, out);
}

// Stragglers' job-wide part (straggler.h): the participants' samples judged together.
void Job::NodeSampled(const std::string& node_id, int round, const StragglerSample& sample,
                      absl::Time now, std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || phase_ != Phase::kRunning || round != round_) return;
  Touch(it->second, now);
  std::vector<NodeStacks> round_nodes;
  for (size_t i = 0; i < participants_.size(); ++i) {
    round_nodes.push_back(NodeStacks{.node_id = participants_[i].node_id,
                                     .host = participants_[i].host,
                                     .group_rank = static_cast<int>(i)});
  }
  std::optional<StragglerVerdict> changed = stragglers_.Add(node_id, round_nodes, sample);
  if (!changed) return;
  for (const NodeInfo& p : participants_) {
    Event e = MakeEvent(Event::Kind::kStraggler, p.node_id, changed->line);
    e.straggler = *changed;
    out->push_back(std::move(e));
  }
}

void Job::WorkersSucceeded(const std::string& node_id, int round, absl::Time now,
                           std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || phase_ != Phase::kRunning || round != round_) return;
  it->second.succeeded = true;
  Touch(it->second, now);
  for (int local = 0; local < static_cast<int>(it->second.workers.size()); ++local) {
    EndWorker(it->second, local, 0, WorkerState::kSucceeded, 0, 0, "exit 0");
  }
  if (settle_.holding()) return;  // a failure of this round is held: it decides, not the successes
  for (const NodeInfo& p : participants_) {
    if (!nodes_.at(p.node_id).succeeded) return;
  }
  int workers = 0;
  for (const NodeInfo& p : participants_) workers += p.local_world_size;
  if (spec_.restart_after_success && restarts_used_ < spec_.max_restarts) {
    ++restarts_used_;
    BeginStopping("RunAgain",
                  absl::StrCat(workers == 1 ? "" : "all ", Plural(workers, "worker", "workers"),
                               " exited 0; policy Always: running again (", restarts_used_, " of ",
                               spec_.max_restarts, " restarts used)"),
                  /*counted=*/true, std::nullopt, now, out);
    return;
  }
  Finish("AllWorkersSucceeded",
         Outcome{.exit_code = exit_code::kSuccess,
                 .root_cause = std::nullopt,
                 .reason = absl::StrCat(
                     workers == 1 ? "" : "all ", Plural(workers, "worker", "workers"), " on ",
                     Plural(participants_.size(), "node", "nodes"), " exited 0")},
         now, out);
}

void Job::WorkersStopped(const std::string& node_id, int round, int store_port, absl::Time now,
                         std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  it->second.info.store_port = store_port;
  Touch(it->second, now);
  if (phase_ != Phase::kStopping || round != round_) return;
  it->second.stopped = true;
  EndRunningWorkers(it->second, "stopped by its agent");
  MaybeFinishStopping(now, out);
}

void Job::BeginStopping(const char* cause, const std::string& reason, bool counted,
                        const std::optional<Failure>& failure, absl::Time now,
                        std::vector<Event>* out) {
  settle_.Drop();  // a held failure was judged by whatever stops the round
  history_.push_back(RestartRecord{.round = round_,
                                   .attempt = attempt_,
                                   .started = round_started_,
                                   .time = now,
                                   .reason = reason,
                                   .counted = counted,
                                   .failure = failure});
  phase_ = Phase::kStopping;
  conditions_.Set(kConditionRunning, false, cause, reason, now);
  conditions_.Set(kConditionRestarting, true, cause, reason, now);
  stopping_since_ = now;
  for (const NodeInfo& p : participants_) {
    nodes_.at(p.node_id).stopped = false;
    Event e = MakeEvent(Event::Kind::kStopWorkers, p.node_id, reason);
    e.failure = failure;
    e.counted = counted;
    out->push_back(std::move(e));
  }
  MaybeFinishStopping(now, out);  // no participant left to wait for
}

void Job::MaybeFinishStopping(absl::Time now, std::vector<Event>* out) {
  if (phase_ != Phase::kStopping) return;
  for (const NodeInfo& p : participants_) {
    if (!nodes_.at(p.node_id).stopped) return;
  }
  QuarantineDue(/*explain=*/false, out);  // a host that stayed may go now
  if (EligibleCount() >= spec_.min_nodes) {
    StartRound(now, out);
    return;
  }
  // Elastic job below its minimum: gather again, with a fresh join timeout.
  phase_ = Phase::kGathering;
  participants_.clear();
  gathering_since_ = now;
  last_call_.reset();
  conditions_.Set(kConditionRestarting, true, "Gathering",
                  absl::StrCat("fewer than the minimum ", spec_.min_nodes, " nodes; gathering"),
                  now);
  for (const auto& [id, node] : nodes_) {
    out->push_back(MakeEvent(Event::Kind::kProgress, id, ProgressText(now)));
  }
}

void Job::MaybeCompleteRound(absl::Time now, std::vector<Event>* out) {
  if (phase_ != Phase::kGathering) return;
  QuarantineDue(/*explain=*/false, out);
  int count = EligibleCount();
  if (count >= spec_.max_nodes || (count >= spec_.min_nodes && last_call_ && now >= *last_call_)) {
    StartRound(now, out);
  }
}

void Job::StartRound(absl::Time now, std::vector<Event>* out) {
  std::vector<Node*> order = RoundOrder();
  ++round_;
  attempt_ = restarts_used_;
  round_formed_in_ = now - (phase_ == Phase::kStopping ? stopping_since_ : gathering_since_);
  round_started_ = now;
  phase_ = Phase::kRunning;
  last_call_.reset();
  progress_owed_.clear();  // each of them hears RoundStarted or "waiting for a place" now
  progress_to_all_ = false;
  progress_due_.reset();
  participants_.clear();
  preemptions_.Clear();
  stragglers_.Clear();
  for (auto& [id, node] : nodes_) node.prev_group_rank = -1;
  int world_size = 0;
  for (auto& [id, node] : nodes_) node.workers.clear();
  int rank_base = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    Node* n = order[i];
    n->prev_group_rank = static_cast<int>(i);
    n->succeeded = n->stopped = n->failed = false;
    n->stall.reset();
    participants_.push_back(n->info);
    world_size += n->info.local_world_size;
    ++n->rounds_started;
    for (int local = 0; local < n->info.local_world_size; ++local) {
      WorkerStatus& w = n->workers.emplace_back();
      w.node_id = n->info.node_id;
      w.host = n->info.host;
      w.group_rank = static_cast<int>(i);
      w.rank = rank_base + local;
      w.local_rank = local;
      w.restarts = n->rounds_started - 1;
    }
    rank_base += n->info.local_world_size;
  }
  std::string started =
      absl::StrCat("round ", round_, ": ", Plural(world_size, "worker", "workers"), " on ",
                   Plural(participants_.size(), "node", "nodes"), " (", restarts_used_, " of ",
                   spec_.max_restarts, " restarts used)");
  conditions_.Set(kConditionRunning, true, "RoundStarted", started, now);
  conditions_.Set(kConditionRestarting, false, "RoundStarted", started, now);
  AnnounceRound(world_size, out);
}

std::vector<Job::Node*> Job::RoundOrder() {
  std::vector<Node*> nodes;
  std::vector<RankCandidate> candidates;
  for (auto& [id, node] : nodes_) {
    if (!node.info.excluded.empty())
      continue;  // its health gate keeps it out (job.cc's NodeHealth)
    nodes.push_back(&node);
    candidates.push_back(RankCandidate{.rank_hint = node.info.rank_hint,
                                       .prev_group_rank = node.prev_group_rank,
                                       .arrival = node.arrival});
  }
  std::vector<Node*> order;
  for (size_t i : RankOrder(candidates, spec_.max_nodes)) order.push_back(nodes[i]);
  return order;
}

void Job::AnnounceRound(int world_size, std::vector<Event>* out) {
  int rank_base = 0;
  for (size_t i = 0; i < participants_.size(); ++i) {
    Event e = MakeEvent(Event::Kind::kRoundStarted, participants_[i].node_id);
    Assignment& a = e.assignment;
    a.round = round_;
    a.restart_count = restarts_used_;
    a.group_rank = static_cast<int>(i);
    a.group_world_size = static_cast<int>(participants_.size());
    a.rank_base = rank_base;
    a.world_size = world_size;
    a.master_addr = participants_[0].address;
    a.master_port = participants_[0].store_port;
    if (participants_[i].wants_node_list) a.nodes = participants_;
    rank_base += participants_[i].local_world_size;
    out->push_back(std::move(e));
  }
  for (const auto& [id, node] : nodes_) {
    if (node.prev_group_rank < 0 && node.info.excluded.empty()) {
      out->push_back(SpareEvent(id));
    }
  }
}

// Spares (docs/guides/spares.md): a healthy node the full round has no place for waits,
// warm, and takes the place of a participant that is lost or excluded in the next round.
Event Job::SpareEvent(const std::string& node_id) const {
  Event e = MakeEvent(Event::Kind::kProgress, node_id,
                      absl::StrCat("spare: round ", round_, " runs with its maximum of ",
                                   Plural(spec_.max_nodes, "node", "nodes"),
                                   "; this node takes the place of one that is lost or excluded"));
  e.spare = true;
  return e;
}

std::string Job::SwapInNote() {
  std::set<std::string_view> in_round;
  for (const NodeInfo& p : participants_) in_round.insert(p.node_id);
  std::vector<std::string> hosts;
  for (const Node* n : RoundOrder()) {
    if (in_round.count(n->info.node_id) == 0) hosts.push_back(n->info.host);
  }
  if (hosts.empty()) return "";
  return absl::StrCat("; spare ", absl::StrJoin(hosts, ", "), " takes its place");
}

void Job::Finish(const char* cause, Outcome outcome, absl::Time now, std::vector<Event>* out) {
  settle_.Drop();
  phase_ = Phase::kFinished;
  outcome_ = std::move(outcome);
  bool ok = outcome_->exit_code == 0;
  conditions_.Set(kConditionRunning, false, cause, outcome_->reason, now);
  conditions_.Set(kConditionRestarting, false, "Finished", outcome_->reason, now);
  conditions_.Set(ok ? kConditionSucceeded : kConditionFailed, true, cause, outcome_->reason, now);
  conditions_.Set(ok ? kConditionFailed : kConditionSucceeded, false, "Finished", outcome_->reason,
                  now);
  for (auto& [id, node] : nodes_) {
    // Every worker's state is final: the ones still running are stopped by their agents now.
    EndRunningWorkers(node, "stopped: the job ended");
    Event e = MakeEvent(Event::Kind::kFinished, id, outcome_->reason);
    e.outcome = *outcome_;
    out->push_back(std::move(e));
  }
}

void Job::TracesStored(const std::string& node_id, int round, const std::string& location,
                       TraceNode stored, const std::string& error, absl::Time now,
                       std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || round <= 0 || round > round_) return;
  Touch(it->second, now);
  const TraceRound* r =
      traces_.Report(round, node_id, it->second.info.host, location, std::move(stored));
  if (r == nullptr) return;

  // Who waits for it: the round's nodes still connected (an older round's: the uploader).
  std::vector<std::string> to;
  for (const NodeInfo& p : round == round_ ? participants_ : std::vector<NodeInfo>{}) {
    auto n = nodes_.find(p.node_id);
    if (n != nodes_.end() && !n->second.left) to.push_back(p.node_id);
  }
  if (std::find(to.begin(), to.end(), node_id) == to.end()) to.push_back(node_id);
  const TracesSummary summary = TraceRounds::Summarize(*r, to);
  // The uploader hears what is stored so far; every node once all have reported: O(nodes)
  // events per round, not O(nodes^2).
  if (summary.nodes_reported < summary.nodes_expected) to = {node_id};
  for (const std::string& id : to) {
    Event e = MakeEvent(Event::Kind::kTraces, id);
    e.traces = summary;
    if (id == node_id) e.traces.error = error;
    out->push_back(std::move(e));
  }
}

}  // namespace muster::rdzv
