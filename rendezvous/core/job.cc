#include "rendezvous/core/job.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace muster::rdzv {
namespace {

constexpr int kProgressBroadcastLimit = 64;
// Up to that size every waiting node hears how far the gathering is at most this often; above
// it a joiner hears it only if the round has not started this long after its join: in a round
// that completes at once (thousands of agents joining within a second) that write per agent
// would be a third of the server's work for nothing.
constexpr absl::Duration kProgressDelay = absl::Seconds(1);
// Workers one node may bring. The server keeps a record per worker and sums ranks in int,
// so a bogus Join (local_world_size 2^31-1) must be refused, not allocated (found by
// tests/fuzz/rendezvous_fuzz).
constexpr int kMaxLocalWorldSize = 4096;

std::string Seconds(absl::Duration d) {
  return absl::StrCat(static_cast<int64_t>(absl::ToDoubleSeconds(d) + 0.5), " s");
}

std::string Describe(const NodeInfo& n) {
  return absl::StrCat(n.host, " (", n.address, ", node ", n.node_id, ")");
}

Event MakeEvent(Event::Kind kind, const std::string& node_id, std::string text = "") {
  Event e;
  e.kind = kind;
  e.node_id = node_id;
  e.text = std::move(text);
  return e;
}

// A spec the job can run: the first joiner's becomes the job's, and a wire message can
// carry anything (a job of at most 0 nodes would "run" a round of none forever; found by
// tests/fuzz/rendezvous_fuzz).
absl::Status CheckSpec(const JobSpec& spec, const NodeInfo& who) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("node ", Describe(who), ": ", what));
  };
  if (spec.min_nodes < 1 || spec.max_nodes < spec.min_nodes) {
    return bad(
        absl::StrCat("--nnodes ", spec.min_nodes, ":", spec.max_nodes, " needs 1 <= MIN <= MAX"));
  }
  if (spec.max_restarts < 0) return bad(absl::StrCat("--max-restarts ", spec.max_restarts, " < 0"));
  if (spec.heartbeat_interval <= absl::ZeroDuration() || spec.heartbeat_misses < 1) {
    return bad("heartbeat_interval and heartbeat_misses must be positive (--rdzv-conf)");
  }
  if (spec.join_timeout < absl::ZeroDuration() || spec.last_call_timeout < absl::ZeroDuration() ||
      spec.stop_timeout < absl::ZeroDuration()) {
    return bad("negative join, last-call or stop timeout (--rdzv-conf)");
  }
  return absl::OkStatus();
}

// The JobSpec fields every node must agree on, with the flag that sets each.
absl::Status CheckSameSpec(const JobSpec& job, const JobSpec& node, const NodeInfo& who) {
  auto differs = [&](const char* flag, const std::string& theirs, const std::string& ours) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", theirs, " of node ", Describe(who),
                                                   " differs from the job's ", ours,
                                                   "; every node must be started with the same"));
  };
  if (node.run_id != job.run_id) return differs("--rdzv-id", node.run_id, job.run_id);
  if (node.min_nodes != job.min_nodes || node.max_nodes != job.max_nodes) {
    return differs("--nnodes", absl::StrCat(node.min_nodes, ":", node.max_nodes),
                   absl::StrCat(job.min_nodes, ":", job.max_nodes));
  }
  if (node.max_restarts != job.max_restarts) {
    return differs("--max-restarts", std::to_string(node.max_restarts),
                   std::to_string(job.max_restarts));
  }
  if (node.restart_after_success != job.restart_after_success) {
    return differs("--restart-policy", node.restart_after_success ? "Always" : "not Always",
                   job.restart_after_success ? "Always" : "not Always");
  }
  return absl::OkStatus();
}

}  // namespace

Job::Job(JobSpec spec, absl::Time now)
    : spec_(std::move(spec)), gathering_since_(now), conditions_(now) {}

std::vector<NodeInfo> Job::Nodes() const {
  std::vector<NodeInfo> out;
  out.reserve(nodes_.size());
  for (const auto& [id, node] : nodes_) {
    if (!node.left) out.push_back(node.info);
  }
  return out;
}

std::vector<Job::NodeView> Job::NodeViews() const {
  // A node is in the current round when it got a group rank at the last StartRound and
  // the round's participants have not been cleared since (gathering again).
  size_t round_size = 0;
  if (!participants_.empty()) {
    for (const auto& [id, node] : nodes_) {
      round_size = std::max(round_size, static_cast<size_t>(node.prev_group_rank + 1));
    }
  }
  std::vector<NodeView> ranked(round_size);
  std::vector<NodeView> waiting;
  for (const auto& [id, node] : nodes_) {
    NodeView v;
    v.info = node.info;
    v.last_seen = node.last_seen;
    bool in_round = !participants_.empty() && node.prev_group_rank >= 0;
    if (in_round) v.group_rank = node.prev_group_rank;
    if (node.left) {
      v.state = "Left";
    } else if (!in_round) {
      v.state = "Waiting";
    } else if (node.failed) {
      v.state = "Failed";
    } else if (node.succeeded) {
      v.state = "Succeeded";
    } else if (phase_ == Phase::kStopping) {
      v.state = node.stopped ? "Stopped" : "Stopping";
    } else if (phase_ == Phase::kFinished) {
      v.state = "Stopped";
    } else {
      v.state = "Running";
    }
    if (in_round) {
      ranked[v.group_rank] = std::move(v);
    } else {
      waiting.push_back(std::move(v));  // std::map order: by node id
    }
  }
  std::vector<NodeView> out;
  out.reserve(nodes_.size());
  for (NodeView& v : ranked) {
    if (!v.info.node_id.empty()) out.push_back(std::move(v));
  }
  for (NodeView& v : waiting) out.push_back(std::move(v));
  return out;
}

std::vector<WorkerStatus> Job::Workers() const {
  // Participants are in group-rank order, and each node's workers in local-rank order:
  // together, global-rank order.
  std::vector<WorkerStatus> out;
  for (const NodeInfo& p : participants_) {
    auto it = nodes_.find(p.node_id);
    if (it == nodes_.end()) continue;
    out.insert(out.end(), it->second.workers.begin(), it->second.workers.end());
  }
  return out;
}

void Job::WorkersStarted(const std::string& node_id, int round,
                         const std::vector<StartedWorker>& workers, absl::Time now) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || round != round_ || it->second.left) return;
  Node& node = it->second;
  Touch(node, now);
  for (const StartedWorker& w : workers) {
    if (w.local_rank < 0 || w.local_rank >= static_cast<int>(node.workers.size())) continue;
    WorkerStatus& status = node.workers[w.local_rank];
    status.pid = w.pid;
    // The rank stays the layout's: the server handed it out, and a status that shows what an
    // agent claims instead would contradict the round (found by tests/fuzz/rendezvous_fuzz).
    if (status.state == WorkerState::kPending) status.state = WorkerState::kRunning;
  }
}

void Job::WorkerEnded(const std::string& node_id, int round, const EndedWorker& ended,
                      absl::Time now) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || round != round_ || it->second.left) return;
  Touch(it->second, now);
  WorkerState state = ended.stopped     ? WorkerState::kStopped
                      : ended.code == 0 ? WorkerState::kSucceeded
                                        : WorkerState::kFailed;
  EndWorker(it->second, ended.local_rank, ended.pid, state, ended.code, ended.signal, ended.what);
}

void Job::EndWorker(Node& node, int local_rank, int pid, WorkerState state, int code, int signal,
                    const std::string& what) {
  if (local_rank < 0 || local_rank >= static_cast<int>(node.workers.size())) return;
  WorkerStatus& w = node.workers[local_rank];
  if (w.state != WorkerState::kPending && w.state != WorkerState::kRunning) return;
  if (pid != 0) w.pid = pid;
  w.state = state;
  w.code = code;
  w.signal = signal;
  w.what = what;
}

bool Job::IsParticipant(const std::string& node_id) const {
  return std::any_of(participants_.begin(), participants_.end(),
                     [&](const NodeInfo& n) { return n.node_id == node_id; });
}

void Job::ForgetHint(const NodeInfo& info) {
  auto it = hinted_.find(info.rank_hint);
  if (it != hinted_.end() && it->second == info.node_id) hinted_.erase(it);
}

void Job::Touch(Node& node, absl::Time now) {
  if (!node.left) node.last_seen = now;
}

absl::Status Job::Join(const NodeInfo& info, const JobSpec& spec, absl::Time now,
                       std::vector<Event>* out) {
  if (phase_ == Phase::kFinished) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", spec_.run_id, " has already finished: ", outcome_->reason));
  }
  if (absl::Status s = CheckSpec(spec, info); !s.ok()) return s;
  if (absl::Status s = CheckSameSpec(spec_, spec, info); !s.ok()) return s;
  if (info.local_world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", Describe(info), " has no workers (local_world_size ", info.local_world_size, ")"));
  }
  if (info.local_world_size > kMaxLocalWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", Describe(info), " brings ", info.local_world_size,
                     " workers; at most ", kMaxLocalWorldSize, " per node (--nproc-per-node)"));
  }
  if (info.rank_hint >= spec_.max_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node rank ", info.rank_hint, " of ", Describe(info), " is outside 0..",
        spec_.max_nodes - 1, " (--nnodes allows at most ", spec_.max_nodes, " nodes)"));
  }
  if (info.rank_hint >= 0) {
    auto claimed = hinted_.find(info.rank_hint);
    if (claimed != hinted_.end() && claimed->second != info.node_id) {
      return absl::InvalidArgumentError(
          absl::StrCat("node rank ", info.rank_hint, " is claimed by both ",
                       Describe(nodes_.at(claimed->second).info), " and ", Describe(info),
                       "; give every node its own --node-rank"));
    }
  }
  auto [it, inserted] = nodes_.try_emplace(info.node_id);
  Node& node = it->second;
  if (!inserted) ForgetHint(node.info);
  node.info = info;
  if (info.rank_hint >= 0) hinted_[info.rank_hint] = info.node_id;
  if (inserted) {
    node.joined_at = now;
    node.arrival = arrivals_++;
  }
  Touch(node, now);

  switch (phase_) {
    case Phase::kGathering:
      if (LiveCount() >= spec_.min_nodes && !last_call_) {
        last_call_ = now + spec_.last_call_timeout;
      }
      MaybeCompleteRound(now, out);
      if (phase_ == Phase::kGathering) {
        // How far the gathering is: a joiner of a small job hears it at once, every waiting
        // node at most once a second (telling all of them on every join made a round
        // O(n^2) in messages), and above kProgressBroadcastLimit nodes only joiners still
        // waiting a second after their join.
        if (LiveCount() <= kProgressBroadcastLimit) {
          out->push_back(MakeEvent(Event::Kind::kProgress, info.node_id, ProgressText(now)));
          progress_to_all_ = true;
        } else {
          progress_owed_.push_back(info.node_id);
        }
        if (!progress_due_) progress_due_ = now + kProgressDelay;
      }
      break;
    case Phase::kRunning:
      if (static_cast<int>(participants_.size()) < spec_.max_nodes) {
        BeginStopping("NodeJoined",
                      absl::StrCat("node ", info.host, " joined; re-forming with ",
                                   participants_.size() + 1, " nodes"),
                      /*counted=*/false, std::nullopt, now, out);
      } else {
        out->push_back(MakeEvent(Event::Kind::kProgress, info.node_id,
                                 absl::StrCat("the job runs with its maximum of ", spec_.max_nodes,
                                              " nodes; waiting for a free place")));
      }
      break;
    case Phase::kStopping:
      out->push_back(MakeEvent(Event::Kind::kProgress, info.node_id,
                               "the job is between rounds; joining the next one"));
      break;
    case Phase::kFinished:
      break;
  }
  return absl::OkStatus();
}

void Job::Heartbeat(const std::string& node_id, absl::Time now) {
  auto it = nodes_.find(node_id);
  if (it != nodes_.end()) Touch(it->second, now);
}

void Job::NodeLost(const std::string& node_id, const std::string& why, absl::Time now,
                   std::vector<Event>* out) {
  RemoveNode(node_id, why, now, out);
}

void Job::RemoveNode(std::string node_id, const std::string& why, absl::Time now,
                     std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.left) return;
  if (phase_ == Phase::kFinished) {
    // The normal end: agents hang up after the outcome. The final status keeps them.
    it->second.left = true;
    ++left_count_;
    return;
  }
  NodeInfo info = it->second.info;
  ForgetHint(info);
  nodes_.erase(it);
  bool participant = IsParticipant(node_id);
  std::string what = absl::StrCat("node ", info.host, " (", info.address, ") lost: ", why);

  switch (phase_) {
    case Phase::kGathering:
      if (LiveCount() < spec_.min_nodes) last_call_.reset();
      return;
    case Phase::kFinished:
      return;
    case Phase::kRunning:
    case Phase::kStopping:
      break;
  }
  if (!participant) return;  // a waiting node: nothing else changes
  participants_.erase(std::remove_if(participants_.begin(), participants_.end(),
                                     [&](const NodeInfo& n) { return n.node_id == node_id; }),
                      participants_.end());
  if (LiveCount() < spec_.min_nodes) {
    Failure f;
    f.node_id = info.node_id;
    f.host = info.host;
    f.code = 138;
    f.what = what;
    Finish("NodeLost",
           Outcome{138, f,
                   absl::StrCat(what, "; ", LiveCount(), " node", LiveCount() == 1 ? "" : "s",
                                " left, fewer than --nnodes minimum ", spec_.min_nodes)},
           now, out);
    return;
  }
  if (phase_ == Phase::kRunning) {
    BeginStopping("NodeLost",
                  absl::StrCat(what, "; re-forming with the ", LiveCount(), " nodes left"),
                  /*counted=*/false, std::nullopt, now, out);
  } else {
    MaybeFinishStopping(now, out);  // it will never acknowledge the stop
  }
}

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
  std::string what =
      absl::StrCat("rank ", failure.rank, " on ", failure.host, " failed: ", failure.what);
  if (!failure.message.empty()) absl::StrAppend(&what, ": ", failure.message);
  if (failure.restartable && restarts_used_ < spec_.max_restarts) {
    ++restarts_used_;
    BeginStopping("WorkerFailed",
                  absl::StrCat(what, "; restarting (", restarts_used_, " of ", spec_.max_restarts,
                               " restarts used)"),
                  /*counted=*/true, failure, now, out);
    return;
  }
  std::string why = failure.restartable
                        ? absl::StrCat("restart budget spent (", restarts_used_, " of ",
                                       spec_.max_restarts, " restarts used)")
                        : std::string("not restartable");
  history_.push_back(RestartRecord{round_, now, absl::StrCat(what, "; ", why), false, failure});
  // Every agent exits with this code: a failure must never read as success (a report with
  // code 0, or 256 that the exit status truncates to 0; found by tests/fuzz/rendezvous_fuzz).
  int code = failure.code >= 1 && failure.code <= 255 ? failure.code : 1;
  Finish(failure.restartable ? "RestartBudgetSpent" : "NotRestartable",
         Outcome{code, failure, absl::StrCat(what, "; ", why)}, now, out);
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
  for (const NodeInfo& p : participants_) {
    if (!nodes_.at(p.node_id).succeeded) return;
  }
  int workers = 0;
  for (const NodeInfo& p : participants_) workers += p.local_world_size;
  if (spec_.restart_after_success && restarts_used_ < spec_.max_restarts) {
    ++restarts_used_;
    BeginStopping("RunAgain",
                  absl::StrCat("all ", workers, " workers exited 0; policy Always: running again (",
                               restarts_used_, " of ", spec_.max_restarts, " restarts used)"),
                  /*counted=*/true, std::nullopt, now, out);
    return;
  }
  Finish("AllWorkersSucceeded",
         Outcome{0, std::nullopt,
                 absl::StrCat("all ", workers, " workers on ", participants_.size(), " node",
                              participants_.size() == 1 ? "" : "s", " exited 0")},
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
  MaybeFinishStopping(now, out);
}

void Job::BeginStopping(const char* cause, const std::string& reason, bool counted,
                        const std::optional<Failure>& failure, absl::Time now,
                        std::vector<Event>* out) {
  history_.push_back(RestartRecord{round_, now, reason, counted, failure});
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
  if (LiveCount() >= spec_.min_nodes) {
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
  int count = LiveCount();
  if (count >= spec_.max_nodes || (count >= spec_.min_nodes && last_call_ && now >= *last_call_)) {
    StartRound(now, out);
  }
}

void Job::StartRound(absl::Time now, std::vector<Event>* out) {
  // Order: rank hints first (by hint), then survivors in their previous order, then
  // newcomers in arrival order. The first max_nodes of them form the round; hinted nodes
  // then take their hinted positions.
  constexpr int64_t kLast = std::numeric_limits<int64_t>::max();
  std::vector<Node*> order;
  for (auto& [id, node] : nodes_) order.push_back(&node);
  auto key = [&](const Node* n) {
    return std::make_tuple(n->info.rank_hint >= 0 ? n->info.rank_hint : kLast,
                           n->prev_group_rank >= 0 ? n->prev_group_rank : kLast, n->arrival);
  };
  std::sort(order.begin(), order.end(),
            [&](const Node* a, const Node* b) { return key(a) < key(b); });
  if (static_cast<int>(order.size()) > spec_.max_nodes) order.resize(spec_.max_nodes);
  // A hint is a position, not only a priority: with some nodes hinted and others not,
  // `--node-rank 2` must still be group rank 2 (when the round has that many nodes). The
  // others fill the free positions in the order above.
  {
    std::vector<Node*> placed(order.size(), nullptr);
    std::vector<Node*> rest;
    for (Node* n : order) {
      int64_t hint = n->info.rank_hint;
      if (hint >= 0 && hint < static_cast<int64_t>(placed.size()) && placed[hint] == nullptr) {
        placed[hint] = n;
      } else {
        rest.push_back(n);
      }
    }
    size_t next = 0;
    for (Node*& slot : placed) {
      if (slot == nullptr) slot = rest[next++];
    }
    order = std::move(placed);
  }

  ++round_;
  phase_ = Phase::kRunning;
  last_call_.reset();
  progress_owed_.clear();  // each of them hears RoundStarted or "waiting for a place" now
  progress_to_all_ = false;
  progress_due_.reset();
  participants_.clear();
  for (auto& [id, node] : nodes_) node.prev_group_rank = -1;
  int world_size = 0;
  for (auto& [id, node] : nodes_) node.workers.clear();
  int rank_base = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    Node* n = order[i];
    n->prev_group_rank = static_cast<int>(i);
    n->succeeded = n->stopped = n->failed = false;
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
      absl::StrCat("round ", round_, ": ", world_size, " workers on ", participants_.size(),
                   " node", participants_.size() == 1 ? "" : "s", " (", restarts_used_, " of ",
                   spec_.max_restarts, " restarts used)");
  conditions_.Set(kConditionRunning, true, "RoundStarted", started, now);
  conditions_.Set(kConditionRestarting, false, "RoundStarted", started, now);
  rank_base = 0;
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
    if (node.prev_group_rank < 0) {
      out->push_back(MakeEvent(Event::Kind::kProgress, id,
                               absl::StrCat("round ", round_, " runs with the maximum of ",
                                            spec_.max_nodes, " nodes; waiting for a place")));
    }
  }
}

void Job::Finish(const char* cause, Outcome outcome, absl::Time now, std::vector<Event>* out) {
  phase_ = Phase::kFinished;
  outcome_ = std::move(outcome);
  bool ok = outcome_->exit_code == 0;
  conditions_.Set(kConditionRunning, false, cause, outcome_->reason, now);
  conditions_.Set(kConditionRestarting, false, "Finished", outcome_->reason, now);
  conditions_.Set(ok ? kConditionSucceeded : kConditionFailed, true, cause, outcome_->reason, now);
  conditions_.Set(ok ? kConditionFailed : kConditionSucceeded, false, "Finished", outcome_->reason,
                  now);
  for (const auto& [id, node] : nodes_) {
    Event e = MakeEvent(Event::Kind::kFinished, id, outcome_->reason);
    e.outcome = *outcome_;
    out->push_back(std::move(e));
  }
}

std::string Job::ProgressText(absl::Time now) const {
  int count = LiveCount();
  std::string text = absl::StrCat("joined ", count, "/", spec_.max_nodes, " nodes");
  if (spec_.min_nodes != spec_.max_nodes) absl::StrAppend(&text, " (min ", spec_.min_nodes, ")");
  if (count >= spec_.min_nodes && last_call_) {
    absl::StrAppend(&text, "; waiting up to ", Seconds(*last_call_ - now), " for more");
  } else {
    absl::StrAppend(&text, "; waiting for ", spec_.min_nodes - count, " more, ",
                    Seconds(now - gathering_since_), " of ", Seconds(spec_.join_timeout));
  }
  // O(1) in the number of nodes: it is built on every join.
  std::vector<int> missing;
  for (int r = 0; r < spec_.max_nodes && spec_.max_nodes <= 64; ++r) {
    if (hinted_.count(r) == 0) missing.push_back(r);
  }
  if (!hinted_.empty() && !missing.empty()) {
    absl::StrAppend(&text, "; missing node ranks ", absl::StrJoin(missing, ","));
  }
  return text;
}

void Job::Tick(absl::Time now, std::vector<Event>* out) {
  if (phase_ == Phase::kFinished) return;
  if (progress_due_ && now >= *progress_due_) {
    progress_due_.reset();
    if (phase_ == Phase::kGathering) {
      std::string text = ProgressText(now);
      if (progress_to_all_) {
        for (const auto& [id, node] : nodes_) {
          if (!node.left) out->push_back(MakeEvent(Event::Kind::kProgress, id, text));
        }
      } else {
        for (const std::string& id : progress_owed_) {
          auto it = nodes_.find(id);
          if (it != nodes_.end() && !it->second.left) {
            out->push_back(MakeEvent(Event::Kind::kProgress, id, text));
          }
        }
      }
    }
    progress_owed_.clear();
    progress_to_all_ = false;
  }
  if (phase_ == Phase::kStopping && now - stopping_since_ >= spec_.stop_timeout) {
    std::vector<std::string> late;
    for (const NodeInfo& p : participants_) {
      if (!nodes_.at(p.node_id).stopped) late.push_back(p.node_id);
    }
    for (const std::string& id : late) {
      RemoveNode(id, absl::StrCat("did not stop its workers within ", Seconds(spec_.stop_timeout)),
                 now, out);
    }
  }
  if (phase_ == Phase::kGathering) {
    if (LiveCount() < spec_.min_nodes && now - gathering_since_ >= spec_.join_timeout) {
      std::vector<std::string> hosts;
      for (const auto& [id, node] : nodes_) hosts.push_back(node.info.host);
      Finish("RendezvousTimeout",
             Outcome{138, std::nullopt,
                     absl::StrCat("rendezvous timed out after ", Seconds(spec_.join_timeout), ": ",
                                  LiveCount(), " of the minimum ", spec_.min_nodes,
                                  " nodes joined (", absl::StrJoin(hosts, ", "), ")")},
             now, out);
      return;
    }
    MaybeCompleteRound(now, out);
  }
}

std::optional<absl::Time> Job::NextDeadline() const {
  if (phase_ == Phase::kFinished) return std::nullopt;
  std::optional<absl::Time> next;
  auto consider = [&](absl::Time t) {
    if (!next || t < *next) next = t;
  };
  if (phase_ == Phase::kGathering) {
    if (LiveCount() >= spec_.min_nodes && last_call_) {
      consider(*last_call_);
    } else {
      consider(gathering_since_ + spec_.join_timeout);
    }
  }
  if (phase_ == Phase::kStopping) consider(stopping_since_ + spec_.stop_timeout);
  if (progress_due_) consider(*progress_due_);
  return next;
}

}  // namespace muster::rdzv
