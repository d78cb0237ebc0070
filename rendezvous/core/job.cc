// Job (job.h): membership and deadlines. A node joins (checked by join_checks.h), is kept
// out by its health gate or let back in, is preempted or drained, or is lost; the progress
// of a gathering, its last call and join timeout, and the stop timeout fire in Tick. Rounds and the
// outcome are in job_round.cc, the status of nodes and workers in job_workers.cc.
#include "rendezvous/core/job.h"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/exit_codes.h"
#include "base/plural.h"
#include "rendezvous/core/join_checks.h"

namespace muster::rdzv {
namespace {

constexpr int kProgressBroadcastLimit = 64;
// Up to that size every waiting node hears how far the gathering is at most this often; above
// it a joiner hears it only if the round has not started this long after its join: in a round
// that completes at once (thousands of agents joining within a second) that write per agent
// would be a third of the server's work for nothing.
constexpr absl::Duration kProgressDelay = absl::Seconds(1);

std::string Seconds(absl::Duration d) {
  return absl::StrCat(static_cast<int64_t>(absl::ToDoubleSeconds(d) + 0.5), " s");
}

}  // namespace

Job::Job(JobSpec spec, absl::Time now)
    : spec_(std::move(spec)),
      gathering_since_(now),
      conditions_(now),
      bad_nodes_(spec_.quarantine_after) {}

std::vector<NodeInfo> Job::Nodes() const {
  std::vector<NodeInfo> out;
  out.reserve(nodes_.size());
  for (const auto& [id, node] : nodes_) {
    if (!node.left) out.push_back(node.info);
  }
  return out;
}

Event Job::MakeEvent(Event::Kind kind, const std::string& node_id, std::string text) {
  Event e;
  e.kind = kind;
  e.node_id = node_id;
  e.text = std::move(text);
  return e;
}

bool Job::IsParticipant(const std::string& node_id) const {
  return std::any_of(participants_.begin(), participants_.end(),
                     [&](const NodeInfo& n) { return n.node_id == node_id; });
}

void Job::ContinueFrom(int round, int restarts_used, std::vector<RestartRecord> history,
                       const std::vector<std::string>& previous_order) {
  for (size_t i = 0; i < previous_order.size(); ++i) {
    carried_ranks_[previous_order[i]] = static_cast<int>(i);
  }
  round_ = round;
  restarts_used_ = restarts_used;
  attempt_ = restarts_used;
  history_ = std::move(history);
  bad_nodes_.Replay(history_);
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
        absl::StrCat("job ", spec_.run_id, " has already finished (", outcome_->reason,
                     "); the server keeps a finished job's status for `muster status`: start "
                     "the new job with another --rdzv-id (or restart the server to reuse it)"));
  }
  if (absl::Status s = CheckJobSpec(spec, info); !s.ok()) return s;
  if (absl::Status s = CheckSameJobSpec(spec_, spec, info); !s.ok()) return s;
  if (absl::Status s = CheckNodeFits(info, spec_); !s.ok()) return s;
  if (info.rank_hint >= 0) {
    auto claimed = hinted_.find(info.rank_hint);
    if (claimed != hinted_.end() && claimed->second != info.node_id) {
      return absl::InvalidArgumentError(
          absl::StrCat("node rank ", info.rank_hint, " is claimed by both ",
                       DescribeNode(nodes_.at(claimed->second).info), " and ", DescribeNode(info),
                       "; give every node its own --node-rank"));
    }
  }
  if (spec_.spares > 0 && nodes_.count(info.node_id) == 0 &&
      LiveCount() >= spec_.max_nodes + spec_.spares) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", spec_.run_id, " has its ", spec_.max_nodes, " nodes and ",
        Plural(spec_.spares, "spare", "spares"), " (--nnodes, --spares); ", DescribeNode(info),
        " is one too many: raise --spares on every node to keep more"));
  }
  auto [it, inserted] = nodes_.try_emplace(info.node_id);
  Node& node = it->second;
  if (!inserted) ForgetHint(node.info);
  if (!inserted && !node.info.excluded.empty()) --excluded_count_;
  node.info = info;
  // A node of a quarantined host (its agent restarted, or another agent there) stays out.
  node.quarantined = bad_nodes_.quarantined(info.host);
  if (node.quarantined) node.info.excluded = bad_nodes_.Reason(info.host);
  if (!node.info.excluded.empty()) ++excluded_count_;
  if (info.rank_hint >= 0) hinted_[info.rank_hint] = info.node_id;
  if (inserted) {
    node.joined_at = now;
    node.arrival = arrivals_++;
    auto carried = carried_ranks_.find(info.node_id);
    if (carried != carried_ranks_.end()) node.prev_group_rank = carried->second;
  }
  Touch(node, now);
  if (node.quarantined) {
    Event e =
        MakeEvent(Event::Kind::kProgress, info.node_id,
                  absl::StrCat("kept out of rounds for the rest of the job: ", node.info.excluded));
    e.quarantined = node.info.excluded;
    out->push_back(std::move(e));
    return absl::OkStatus();
  }
  if (!info.excluded.empty()) {
    out->push_back(MakeEvent(Event::Kind::kProgress, info.node_id,
                             absl::StrCat("kept out of rounds until healthy: ", info.excluded)));
    return absl::OkStatus();
  }
  Arrive(info, "NodeJoined", now, out);
  return absl::OkStatus();
}

void Job::Arrive(const NodeInfo& info, const char* cause, absl::Time now, std::vector<Event>* out) {
  switch (phase_) {
    case Phase::kGathering:
      if (EligibleCount() >= spec_.min_nodes && !last_call_) {
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
      if (settle_.holding()) {  // the round's failure is being judged: wait for its end
        out->push_back(MakeEvent(Event::Kind::kProgress, info.node_id,
                                 "a failure of the running round is being judged; joining the "
                                 "next round, if there is one"));
      } else if (static_cast<int>(participants_.size()) < spec_.max_nodes) {
        BeginStopping(
            cause,
            absl::StrCat(
                "node ", info.host,
                std::string_view(cause) == "NodeJoined" ? " joined" : " passed its health gate",
                "; re-forming with ", participants_.size() + 1, " nodes"),
            /*counted=*/false, std::nullopt, now, out);
      } else {
        out->push_back(SpareEvent(info.node_id));
      }
      break;
    case Phase::kStopping:
      out->push_back(MakeEvent(Event::Kind::kProgress, info.node_id,
                               "the job is between rounds; joining the next one"));
      break;
    case Phase::kFinished:
      break;
  }
}

// A node's health gate (agent/health/health_gate.h, docs/design.md §3 "Health gate") keeps
// it out of rounds, or lets it back in. The node stays live and listed (kExcluded, with its
// reason), so that a sick node is seen in the status instead of missing from it; it counts
// toward no round until it says it is healthy again, then it arrives as a joiner does.
void Job::NodeHealth(const std::string& node_id, const std::string& excluded, absl::Time now,
                     std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.left || phase_ == Phase::kFinished) return;
  Node& node = it->second;
  Touch(node, now);
  if (node.quarantined) return;  // out for the rest of the job, whatever its gate says
  const bool was_excluded = !node.info.excluded.empty();
  node.info.excluded = excluded;
  if (excluded.empty() == !was_excluded) return;  // the same verdict: only the reason changes
  if (!excluded.empty()) {
    ++excluded_count_;
    out->push_back(MakeEvent(Event::Kind::kProgress, node_id,
                             absl::StrCat("kept out of rounds until healthy: ", excluded)));
    // A gathering that counted it may have lost its quorum; a running round goes on (the
    // gate speaks between rounds: this node has stopped or is about to report so).
    if (phase_ == Phase::kGathering && EligibleCount() < spec_.min_nodes) last_call_.reset();
    return;
  }
  --excluded_count_;
  if (IsParticipant(node_id)) return;  // it ran this round: the next one counts it again
  Arrive(node.info, "NodeHealthy", now, out);
}

// The bad-node memory's verdicts (bad_nodes.h, docs/guides/health-gate.md "Bad-node
// memory"). A due host is quarantined only when the next round can still form without it:
// the eligible nodes left (a spare counts as any eligible node) reach --nnodes' minimum.
// Otherwise it stays and takes part, and the next round formation asks again (a spare or a
// recovered node may have arrived meanwhile). O(nodes) per due host, and only while one is.
std::string Job::QuarantineDue(bool explain, std::vector<Event>* out) {
  std::vector<std::string> notes;
  for (const std::string& host : bad_nodes_.Due()) {
    std::vector<Node*> on_host;
    int eligible_there = 0;
    for (auto& [id, node] : nodes_) {
      if (node.left || node.info.host != host) continue;
      on_host.push_back(&node);
      if (node.info.excluded.empty()) ++eligible_there;
    }
    const int left = EligibleCount() - eligible_there;
    if (left < spec_.min_nodes) {
      // Said only where other hosts take part: a one-node job, or every agent on one machine,
      // has no host to go on with.
      if (explain && on_host.size() < static_cast<size_t>(LiveCount())) {
        notes.push_back(
            absl::StrCat("host ", host, " stays in the job though it was the root cause of ",
                         bad_nodes_.count(host), " failed attempts (--quarantine-after ",
                         spec_.quarantine_after, "): without it ", Plural(left, "node", "nodes"),
                         " would be left, fewer than the minimum ", spec_.min_nodes,
                         " (--nnodes); a spare or another node would let it go"));
      }
      continue;
    }
    bad_nodes_.Quarantine(host);
    const std::string reason = bad_nodes_.Reason(host);
    for (Node* node : on_host) {
      if (node->info.excluded.empty()) ++excluded_count_;
      node->quarantined = true;
      node->info.excluded = reason;
      Event e = MakeEvent(Event::Kind::kProgress, node->info.node_id,
                          absl::StrCat("kept out of rounds for the rest of the job: ", reason));
      e.quarantined = reason;
      out->push_back(std::move(e));
    }
    notes.push_back(absl::StrCat("host ", host, " ", reason));
  }
  return absl::StrJoin(notes, "; ");
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
  if (!info.excluded.empty()) --excluded_count_;
  nodes_.erase(it);
  bool participant = IsParticipant(node_id);
  std::string what = absl::StrCat("node ", info.host, " (", info.address, ") lost: ", why);
  // A preempted node's loss ends the job with SIGTERM's code, as a signal to every agent.
  const Preemption* preempted = preemptions_.Of(node_id);
  const int lost_code = preempted ? exit_code::ForSignal(SIGTERM) : exit_code::kTransient;
  if (preempted) {
    what = absl::StrCat("node ", info.host, " (", info.address, ") preempted: ", preempted->reason);
  }

  switch (phase_) {
    case Phase::kGathering:
      if (EligibleCount() < spec_.min_nodes) last_call_.reset();
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
  // A failure held for the settle window was this loss's consequence.
  std::string excuse = settle_.Excuse(info.host, now);
  if (!excuse.empty()) excuse = absl::StrCat("; ", excuse);
  if (LiveCount() < spec_.min_nodes) {
    Failure f;
    f.kind = preempted ? FailureKind::kPreempted : FailureKind::kNodeLost;
    f.node_id = info.node_id;
    f.host = info.host;
    f.code = lost_code;
    f.what = what;
    f.restartable = preempted != nullptr;
    Finish(preempted ? "NodePreempted" : "NodeLost",
           Outcome{.exit_code = lost_code,
                   .root_cause = f,
                   .reason = absl::StrCat(what, excuse, "; ", LiveCount(), " node",
                                          LiveCount() == 1 ? "" : "s",
                                          " left, fewer than --nnodes minimum ", spec_.min_nodes)},
           now, out);
    return;
  }
  if (phase_ == Phase::kRunning) {
    BeginStopping(preempted ? "NodePreempted" : "NodeLost",
                  absl::StrCat(what, excuse, "; re-forming with the ",
                               Plural(LiveCount(), "node", "nodes"), " left", SwapInNote()),
                  /*counted=*/false, std::nullopt, now, out);
  } else {
    MaybeFinishStopping(now, out);  // it will never acknowledge the stop
  }
}

// Preemption (docs/guides/preemption.md): the notice goes to every live node before anything
// is stopped; the preempted node leaves afterwards and its loss is handled by RemoveNode,
// with SIGTERM's code.
absl::Status Job::Preempt(const std::string& node_id, const std::string& reason, absl::Time now,
                          std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || it->second.left) {
    return absl::NotFoundError(absl::StrCat("node ", node_id, " is not in job ", spec_.run_id));
  }
  if (phase_ != Phase::kRunning || !IsParticipant(node_id)) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", it->second.info.host, " runs no workers of job ", spec_.run_id,
                     " now (the job is between rounds or finished): nothing to preempt"));
  }
  if (preemptions_.Of(node_id) != nullptr) return absl::OkStatus();
  Touch(it->second, now);
  preemptions_.Add(
      Preemption{.node_id = node_id, .host = it->second.info.host, .reason = reason, .since = now});
  for (const auto& [id, node] : nodes_) {
    if (node.left) continue;
    Event e = MakeEvent(Event::Kind::kPreempt, id, reason);
    e.preempted_node = node_id;
    e.preempted_host = it->second.info.host;
    out->push_back(std::move(e));
  }
  return absl::OkStatus();
}

void Job::PreemptedNodeLeft(const Preemption& p, absl::Time now, std::vector<Event>* out) {
  if (phase_ == Phase::kFinished || LiveCount() >= spec_.min_nodes) return;
  const int code = exit_code::ForSignal(SIGTERM);
  const std::string what = absl::StrCat("node ", p.host, " preempted: ", p.reason);
  Finish(
      "NodePreempted",
      Outcome{.exit_code = code,
              .root_cause = Failure{.kind = FailureKind::kPreempted,
                                    .node_id = p.node_id,
                                    .host = p.host,
                                    .code = code,
                                    .what = what,
                                    .restartable = true},
              .reason = absl::StrCat(what, "; ", LiveCount(), " node", LiveCount() == 1 ? "" : "s",
                                     " left, fewer than --nnodes minimum ", spec_.min_nodes)},
      now, out);
}

absl::StatusOr<NodeInfo> Job::NodeToDrain(const std::string& node_id,
                                          const std::string& host) const {
  NodeInfo drained;
  int matches = 0;
  for (const NodeInfo& n : Nodes()) {
    if ((!node_id.empty() && n.node_id == node_id) || (node_id.empty() && n.host == host)) {
      drained = n;
      ++matches;
    }
  }
  if (matches == 0) {
    return absl::NotFoundError(
        absl::StrCat("job ", spec_.run_id, " has no live node ",
                     node_id.empty() ? absl::StrCat("on host ", host) : node_id,
                     "; `muster status` lists its nodes"));
  }
  if (matches > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("several nodes of job ", spec_.run_id, " run on host ", host,
                     "; name one with --node ID (`muster status` lists their ids)"));
  }
  return drained;
}

std::string Job::ProgressText(absl::Time now) const {
  int count = EligibleCount();
  std::string text = absl::StrCat("joined ", count, "/", spec_.max_nodes, " nodes");
  if (spec_.min_nodes != spec_.max_nodes) absl::StrAppend(&text, " (min ", spec_.min_nodes, ")");
  if (excluded_count_ > 0) {
    absl::StrAppend(&text, "; ", excluded_count_, " more kept out (health gate or quarantine)");
  }
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
  if (std::optional<HeldFailure> held = settle_.Due(now)) {
    FinishFailed(held->cause, held->failure, held->what, now, out);
  }
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
    if (EligibleCount() < spec_.min_nodes && now - gathering_since_ >= spec_.join_timeout) {
      std::vector<std::string> hosts;
      for (const auto& [id, node] : nodes_) {
        hosts.push_back(node.info.excluded.empty()
                            ? node.info.host
                            : absl::StrCat(node.info.host, " excluded: ", node.info.excluded));
      }
      Finish(
          "RendezvousTimeout",
          Outcome{.exit_code = exit_code::kTransient,
                  .root_cause = std::nullopt,
                  .reason = absl::StrCat("rendezvous timed out after ", Seconds(spec_.join_timeout),
                                         ": ", EligibleCount(), " of the minimum ", spec_.min_nodes,
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
    if (EligibleCount() >= spec_.min_nodes && last_call_) {
      consider(*last_call_);
    } else {
      consider(gathering_since_ + spec_.join_timeout);
    }
  }
  if (phase_ == Phase::kStopping) consider(stopping_since_ + spec_.stop_timeout);
  if (progress_due_) consider(*progress_due_);
  if (std::optional<absl::Time> held = settle_.deadline()) consider(*held);
  return next;
}

}  // namespace muster::rdzv
