#include "tests/fuzz/rendezvous_fuzz_checks.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "muster/v1/rendezvous.pb.h"
#include "rendezvous/wire/proto_convert.h"
#include "rendezvous/wire/status_convert.h"

namespace muster::rdzv::fuzz {

using wire::FromProto;
using wire::ToProto;

void Fail(const std::string& what) {
  fprintf(stderr, "rendezvous_fuzz: invariant broken: %s\n", what.c_str());
  abort();
}

std::string Bytes(const google::protobuf::Message& m) {
  std::string out;
  CHECK_OR_FAIL(m.SerializeToString(&out), m.GetTypeName());
  return out;
}

std::string Ids(const std::vector<NodeInfo>& nodes) {
  std::string out;
  for (const NodeInfo& n : nodes) absl::StrAppend(&out, n.node_id, "(", n.rank_hint, ") ");
  return out;
}

void WireRoundTrips(const std::string& bytes) {
  v1::AgentMessage agent;
  if (agent.ParseFromString(bytes)) {
    if (agent.has_join()) {
      NodeInfo node;
      JobSpec spec;
      FromProto(agent.join(), &node, &spec);
      v1::Join once, twice;
      ToProto(node, spec, &once);
      FromProto(once, &node, &spec);
      ToProto(node, spec, &twice);
      CHECK_OR_FAIL(Bytes(once) == Bytes(twice), "Join round trip");
    }
    if (agent.has_worker_failed()) {
      v1::Failure once, twice;
      ToProto(FromProto(agent.worker_failed().failure()), &once);
      ToProto(FromProto(once), &twice);
      CHECK_OR_FAIL(Bytes(once) == Bytes(twice), "Failure round trip");
    }
  }
  v1::ServerMessage server;
  if (server.ParseFromString(bytes)) {
    Event event;
    bool is_event = FromProto(server, "node", &event);
    CHECK_OR_FAIL(is_event == (server.kind_case() != v1::ServerMessage::kError &&
                               server.kind_case() != v1::ServerMessage::KIND_NOT_SET),
                  server.kind_case());
    if (is_event) {
      CHECK_OR_FAIL(event.node_id == "node", event.node_id);
      v1::ServerMessage once, twice;
      ToProto(event, &once);
      Event again;
      CHECK_OR_FAIL(FromProto(once, "node", &again), "event lost");
      ToProto(again, &twice);
      CHECK_OR_FAIL(Bytes(once) == Bytes(twice), "ServerMessage round trip");
    }
    if (server.has_error()) {
      absl::StatusCode code = wire::ToAbslCode(server.error().code());
      CHECK_OR_FAIL(static_cast<int>(code) >= 0 && static_cast<int>(code) <= 16,
                    static_cast<int>(code));
      absl::Status status(code, server.error().message());
      absl::Status back = wire::ToAbslStatus(wire::ToGrpcStatus(status));
      CHECK_OR_FAIL(back == status, absl::StrCat(status.ToString(), " vs ", back.ToString()));
    }
  }
  v1::JobStatusReply reply;
  if (reply.ParseFromString(bytes)) {
    v1::JobStatusReply once, twice;
    ToProto(FromProto(reply), &once);
    ToProto(FromProto(once), &twice);
    CHECK_OR_FAIL(Bytes(once) == Bytes(twice), "JobStatusReply round trip");
  }
}

void JobChecker::Before(const Tracked& t) {
  finished_before_ = t.job.phase() == Job::Phase::kFinished;
  live_before_.clear();
  for (const NodeInfo& n : t.job.Nodes()) live_before_.insert(n.node_id);
}

void JobChecker::After(Tracked& t, const std::vector<Event>& events) {
  if (finished_before_) CHECK_OR_FAIL(events.empty(), "events after the job finished");
  CheckCounters(t);
  CheckOutcome(t);
  std::set<std::string> live_ids = CheckMembers(t);
  CheckWorkers(t);
  CheckEvents(t, events, live_ids);
  // A node that is gone and joins again under the same id is a newcomer.
  std::erase_if(t.previous_round,
                [&](const NodeInfo& n) { return live_ids.count(n.node_id) == 0; });
}

void JobChecker::CheckCounters(Tracked& t) {
  const Job& job = t.job;
  const JobSpec& spec = job.spec();
  // Monotonic counters; the budget is counted once per counted restart.
  CHECK_OR_FAIL(job.round() >= t.round, absl::StrCat(job.round(), " < ", t.round));
  CHECK_OR_FAIL(job.restarts_used() >= t.restarts,
                absl::StrCat(job.restarts_used(), " < ", t.restarts));
  CHECK_OR_FAIL(job.history().size() >= t.history, "history shrank");
  CHECK_OR_FAIL(job.restarts_used() <= std::max(0, spec.max_restarts),
                absl::StrCat(job.restarts_used(), " of ", spec.max_restarts));
  int counted = 0;
  for (const RestartRecord& r : job.history()) counted += r.counted;
  CHECK_OR_FAIL(counted == job.restarts_used(),
                absl::StrCat(counted, " counted vs ", job.restarts_used()));
  t.round = job.round();
  t.restarts = job.restarts_used();
  t.history = job.history().size();
}

void JobChecker::CheckOutcome(Tracked& t) {
  const Job& job = t.job;
  // The outcome: set exactly when finished, never changed afterwards.
  bool finished = job.phase() == Job::Phase::kFinished;
  CHECK_OR_FAIL(finished == job.outcome().has_value(), "outcome vs phase");
  if (t.outcome) {
    CHECK_OR_FAIL(job.outcome() && job.outcome()->exit_code == t.outcome->exit_code &&
                      job.outcome()->reason == t.outcome->reason,
                  "the outcome changed");
  }
  if (job.outcome()) {
    t.outcome = job.outcome();
    // A failure is never reported as success (the agents exit with this code).
    CHECK_OR_FAIL(!job.outcome()->root_cause ||
                      (job.outcome()->exit_code >= 1 && job.outcome()->exit_code <= 255),
                  job.outcome()->reason);
  }
  // Gathering ends by its join timeout or last call, stopping by its stop timeout; a
  // running round waits for its agents (liveness is the transport's).
  if (job.phase() == Job::Phase::kGathering || job.phase() == Job::Phase::kStopping) {
    CHECK_OR_FAIL(job.NextDeadline().has_value(), "no deadline pending");
  }
}

std::set<std::string> JobChecker::CheckMembers(const Tracked& t) {
  const Job& job = t.job;
  const JobSpec& spec = job.spec();
  bool finished = job.phase() == Job::Phase::kFinished;
  // Membership.
  std::vector<NodeInfo> live = job.Nodes();
  std::set<std::string> live_ids;
  for (const NodeInfo& n : live) live_ids.insert(n.node_id);
  const std::vector<NodeInfo>& parts = job.participants();
  std::set<std::string> part_ids;
  for (const NodeInfo& p : parts) {
    CHECK_OR_FAIL(part_ids.insert(p.node_id).second, "duplicate participant " + p.node_id);
    if (!finished) CHECK_OR_FAIL(live_ids.count(p.node_id), "dead participant " + p.node_id);
  }
  if (job.phase() == Job::Phase::kRunning) {
    CHECK_OR_FAIL(!parts.empty() && static_cast<int>(parts.size()) <= spec.max_nodes &&
                      static_cast<int>(parts.size()) >= spec.min_nodes,
                  absl::StrCat(parts.size(), " running of ", spec.min_nodes, ":", spec.max_nodes));
  }
  if (job.phase() == Job::Phase::kGathering) CHECK_OR_FAIL(parts.empty(), Ids(parts));
  // Spares: with --spares set, a node beyond max_nodes + spares was refused at its join.
  if (spec.spares > 0) {
    CHECK_OR_FAIL(static_cast<int>(live.size()) <= spec.max_nodes + spec.spares,
                  absl::StrCat(live.size(), " live nodes, max ", spec.max_nodes, " + ", spec.spares,
                               " spares"));
  }
  // Bad-node memory: a live node out of the round reads Quarantined exactly when its host
  // is quarantined, and a Quarantined node is in no round.
  for (const Job::NodeView& v : job.NodeViews()) {
    const bool host_out = job.bad_nodes().quarantined(v.info.host);
    if (v.state == NodeState::kQuarantined) {
      CHECK_OR_FAIL(host_out && v.group_rank == -1,
                    absl::StrCat(v.info.node_id, " on ", v.info.host, " quarantined, group rank ",
                                 v.group_rank));
    }
    if (host_out && v.group_rank == -1 && v.state != NodeState::kLeft) {
      CHECK_OR_FAIL(v.state == NodeState::kQuarantined,
                    absl::StrCat(v.info.node_id, " on quarantined ", v.info.host, " reads ",
                                 NodeStateName(v.state)));
    }
  }
  return live_ids;
}

void JobChecker::CheckWorkers(const Tracked& t) {
  const Job& job = t.job;
  const std::vector<NodeInfo>& parts = job.participants();
  // Workers of the round: the layout the server handed out, in global-rank order, whatever
  // the agents report about them.
  if (job.phase() == Job::Phase::kRunning) {
    std::vector<WorkerStatus> workers = job.Workers();
    int expected = 0;
    for (size_t g = 0; g < parts.size(); ++g) {
      for (int local = 0; local < parts[g].local_world_size; ++local, ++expected) {
        CHECK_OR_FAIL(expected < static_cast<int>(workers.size()), "missing workers");
        const WorkerStatus& w = workers[expected];
        CHECK_OR_FAIL(w.rank == expected && w.local_rank == local &&
                          w.group_rank == static_cast<int>(g) && w.node_id == parts[g].node_id,
                      absl::StrCat("worker ", expected, " reads rank ", w.rank, " local ",
                                   w.local_rank, " group ", w.group_rank, " on ", w.node_id));
      }
    }
    CHECK_OR_FAIL(static_cast<int>(workers.size()) == expected, "extra workers");
  }
  // A finished job's status is final: no worker still reads Pending or Running.
  if (job.phase() == Job::Phase::kFinished) {
    for (const WorkerStatus& w : job.Workers()) {
      CHECK_OR_FAIL(
          w.state != WorkerState::kPending && w.state != WorkerState::kRunning,
          absl::StrCat("worker ", w.rank, " of a finished job reads ", WorkerStateName(w.state)));
    }
  }
}

void JobChecker::CheckEvents(Tracked& t, const std::vector<Event>& events,
                             const std::set<std::string>& live_ids) {
  const Job& job = t.job;
  if (trace_) {
    fprintf(stderr, "  job %s phase=%d round=%d live=%zu\n", job.spec().run_id.c_str(),
            static_cast<int>(job.phase()), job.round(), live_ids.size());
    for (const Event& e : events) {
      fprintf(stderr, "  -> %s kind=%d %s\n", e.node_id.c_str(), static_cast<int>(e.kind),
              e.text.c_str());
    }
  }
  std::map<std::string, std::string> host_of;  // node id -> host
  for (const Job::NodeView& v : job.NodeViews()) host_of[v.info.node_id] = v.info.host;
  std::set<std::string> in_round;
  for (const NodeInfo& p : job.participants()) in_round.insert(p.node_id);
  std::map<int, std::vector<const Event*>> rounds;  // kRoundStarted by round
  std::map<std::string, int> finished;
  for (const Event& e : events) {
    // A Tick may declare several nodes lost, one after the other: events for one that
    // was alive when the call began are fine (the registry routes them to its stream).
    CHECK_OR_FAIL(live_ids.count(e.node_id) || live_before_.count(e.node_id),
                  "event for a node that is gone: " + e.node_id);
    // What the agent receives: the event through its ServerMessage encoding.
    v1::ServerMessage wire;
    ToProto(e, &wire);
    v1::ServerMessage parsed;
    CHECK_OR_FAIL(parsed.ParseFromString(Bytes(wire)), "ServerMessage did not parse");
    Event got;
    CHECK_OR_FAIL(FromProto(parsed, e.node_id, &got), "event lost on the wire");
    v1::ServerMessage again;
    ToProto(got, &again);
    CHECK_OR_FAIL(Bytes(again) == Bytes(wire), "event changed on the wire");
    CHECK_OR_FAIL(got.kind == e.kind, "kind changed");

    // A spare is out of the round; a node told it is quarantined is on a quarantined host.
    if (e.spare) {
      CHECK_OR_FAIL(!in_round.count(e.node_id), "spare " + e.node_id + " is in the round");
    }
    if (!e.quarantined.empty()) {
      auto host = host_of.find(e.node_id);
      CHECK_OR_FAIL(host != host_of.end() && job.bad_nodes().quarantined(host->second),
                    e.node_id + " told it is quarantined: " + e.quarantined);
    }
    if (e.kind == Event::Kind::kRoundStarted) rounds[e.assignment.round].push_back(&e);
    if (e.kind == Event::Kind::kFinished) {
      ++finished[e.node_id];
      CHECK_OR_FAIL(job.outcome() && e.outcome.exit_code == job.outcome()->exit_code,
                    "finished event vs outcome");
    }
  }
  for (const auto& [id, count] : finished) {
    CHECK_OR_FAIL(count == 1, absl::StrCat(count, " kFinished for ", id));
  }
  if (!finished.empty()) {  // every node still there heard the outcome
    for (const std::string& id : live_ids) {
      CHECK_OR_FAIL(finished.count(id), "kFinished not sent to " + id);
    }
  }
  for (const auto& [round, started] : rounds) CheckRound(t, round, started);
}

// One round's kRoundStarted events: a consistent layout.
void JobChecker::CheckRound(Tracked& t, int round, const std::vector<const Event*>& started) {
  const JobSpec& spec = t.job.spec();
  int n = static_cast<int>(started.size());
  CHECK_OR_FAIL(n >= 1 && n <= spec.max_nodes && n >= spec.min_nodes,
                absl::StrCat(n, " nodes in round ", round));
  std::vector<const Event*> by_rank(n, nullptr);
  const Assignment& first = started[0]->assignment;
  for (const Event* e : started) {
    const Assignment& a = e->assignment;
    CHECK_OR_FAIL(a.group_world_size == n, absl::StrCat(a.group_world_size, " vs ", n));
    CHECK_OR_FAIL(a.group_rank >= 0 && a.group_rank < n && by_rank[a.group_rank] == nullptr,
                  absl::StrCat("group rank ", a.group_rank, " of ", n));
    by_rank[a.group_rank] = e;
    CHECK_OR_FAIL(a.restart_count == first.restart_count && a.world_size == first.world_size &&
                      a.master_addr == first.master_addr && a.master_port == first.master_port,
                  "nodes of one round disagree");
    CHECK_OR_FAIL(static_cast<int>(a.nodes.size()) == n, "nodes list");
    CHECK_OR_FAIL(a.nodes[a.group_rank].node_id == e->node_id, "nodes list order");
  }
  CHECK_OR_FAIL(first.restart_count <= t.job.restarts_used(), "restart count ahead");
  std::vector<NodeInfo> order = first.nodes;
  int64_t base = 0;
  for (int r = 0; r < n; ++r) {
    const Assignment& a = by_rank[r]->assignment;
    CHECK_OR_FAIL(a.rank_base == base, absl::StrCat("rank base ", a.rank_base, " vs ", base));
    CHECK_OR_FAIL(order[r].local_world_size >= 1, "a node without workers");
    CHECK_OR_FAIL(!t.job.bad_nodes().quarantined(order[r].host),
                  absl::StrCat("quarantined host ", order[r].host, " in round ", round));
    base += order[r].local_world_size;
  }
  CHECK_OR_FAIL(first.world_size == base, absl::StrCat("world ", first.world_size, " vs ", base));
  CHECK_OR_FAIL(first.master_addr == order[0].address && first.master_port == order[0].store_port,
                "master is not group rank 0");

  // Hints: honoured exactly when every node of a full round gave one.
  bool all_hinted =
      std::all_of(order.begin(), order.end(), [](const NodeInfo& x) { return x.rank_hint >= 0; });
  if (all_hinted && n == spec.max_nodes) {
    for (int r = 0; r < n; ++r) {
      CHECK_OR_FAIL(order[r].rank_hint == r,
                    absl::StrCat("hint ", order[r].rank_hint, " got rank ", r, ": ", Ids(order)));
    }
  }
  // Survivors without hints keep their previous relative order.
  std::vector<std::string> kept_now, kept_before;
  auto unhinted_in = [](const std::vector<NodeInfo>& v, const std::string& id) {
    return std::any_of(v.begin(), v.end(),
                       [&](const NodeInfo& x) { return x.node_id == id && x.rank_hint < 0; });
  };
  for (const NodeInfo& x : order) {
    if (x.rank_hint < 0 && unhinted_in(t.previous_round, x.node_id)) kept_now.push_back(x.node_id);
  }
  for (const NodeInfo& x : t.previous_round) {
    if (x.rank_hint < 0 && unhinted_in(order, x.node_id)) kept_before.push_back(x.node_id);
  }
  CHECK_OR_FAIL(kept_now == kept_before,
                absl::StrCat("survivors reordered: ", Ids(t.previous_round), "-> ", Ids(order)));
  t.previous_round = order;
}

}  // namespace muster::rdzv::fuzz
