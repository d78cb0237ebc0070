// Job (job.h): what the status shows of the job's nodes and workers (docs/design.md §4.6). The
// workers' layout comes from the round; agents add pids and how each worker ended, which
// changes no decision (those are WorkerFailed and WorkersSucceeded in job_round.cc).
#include <algorithm>

#include "rendezvous/core/job.h"

namespace muster::rdzv {

std::vector<Job::NodeView> Job::NodeViews() const {
  // A node is in the current round when it got a group rank at the last StartRound and
  // the round's participants have not been cleared since (gathering again).
  size_t round_size = 0;
  if (!participants_.empty()) {
    for (const auto& [id, node] : nodes_) {
      round_size = std::max(round_size, static_cast<size_t>(node.prev_group_rank + 1));
    }
  }
  // A healthy node out of a round that holds max_nodes is a spare (docs/guides/spares.md).
  const bool round_full = static_cast<int>(participants_.size()) >= spec_.max_nodes;
  std::vector<NodeView> ranked(round_size);
  std::vector<NodeView> waiting;
  for (const auto& [id, node] : nodes_) {
    NodeView v;
    v.info = node.info;
    v.last_seen = node.last_seen;
    bool in_round = !participants_.empty() && node.prev_group_rank >= 0;
    if (in_round) v.group_rank = node.prev_group_rank;
    if (node.left) {
      v.state = NodeState::kLeft;
    } else if (!in_round) {
      v.state = node.quarantined               ? NodeState::kQuarantined
                : !node.info.excluded.empty() ? NodeState::kExcluded
                : round_full                  ? NodeState::kSpare
                                              : NodeState::kWaiting;
    } else if (node.failed) {
      v.state = NodeState::kFailed;
    } else if (node.succeeded) {
      v.state = NodeState::kSucceeded;
    } else if (phase_ == Phase::kStopping) {
      v.state = node.stopped ? NodeState::kStopped : NodeState::kStopping;
    } else if (phase_ == Phase::kFinished) {
      v.state = NodeState::kStopped;
    } else {
      v.state = NodeState::kRunning;
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
    status.start = w.start;
    status.fallback = w.fallback;
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
  std::vector<WorkerStatus>& workers = it->second.workers;
  if (ended.local_rank >= 0 && ended.local_rank < static_cast<int>(workers.size())) {
    WorkerStatus& w = workers[ended.local_rank];
    // A stop the job marked itself (EndRunningWorkers: code and signal 0) until the agent
    // says how the worker really ended.
    if (w.state == WorkerState::kStopped && w.code == 0 && w.signal == 0) {
      w.state = WorkerState::kRunning;
    }
  }
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

void Job::EndRunningWorkers(Node& node, const std::string& what) {
  for (int local = 0; local < static_cast<int>(node.workers.size()); ++local) {
    EndWorker(node, local, 0, WorkerState::kStopped, 0, 0, what);
  }
}

}  // namespace muster::rdzv
