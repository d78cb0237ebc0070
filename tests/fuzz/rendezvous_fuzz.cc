// libFuzzer target for the rendezvous server's request handling. Two modes, by the first
// byte:
//
//  - data[0] % 4 == 0, "wire": the rest is parsed as each muster.v1 message the server or
//    an agent decodes (AgentMessage, ServerMessage, JobStatusReply) and converted to plain
//    data and back (rendezvous/grpc/proto_convert, status_convert); a second round trip
//    must give the same bytes as the first.
//  - otherwise, "session": the rest is a script of agent messages (Join with varied specs,
//    rank hints, run ids and node ids; Heartbeat, WorkersStarted, WorkerEnded, WorkerFailed,
//    WorkersSucceeded, WorkersStopped, Leave; disconnects; well-behaved replies to the last
//    event) from six agent slots, and fake-clock advances. Every message goes through its
//    proto encoding and is dispatched as grpc/agent_session.cc and registry/job_registry.cc do (one
//    rdzv::Job per run id, created by its first Join), and every event the jobs emit is
//    converted to a ServerMessage and back. After each step the invariants in
//    Session::After, CheckEvents and CheckRound must hold: ranks a permutation with consistent
//    bases, survivors keep their order, rank hints honoured, restart count monotonic and equal to
//    the counted history, the outcome final once set, nothing sent after the end, deadlines that
//    move when they fire, worker status that follows the layout whatever agents report.
//
// Session script: a header (spec of the job most agents agree on), then one opcode byte
// per step (op % 12) followed by its operands; see Session::Step.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "muster/v1/rendezvous.pb.h"
#include "rendezvous/core/job.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/grpc/status_convert.h"

namespace muster::rdzv {
namespace {

using grpc_internal::FromProto;
using grpc_internal::ToProto;

[[noreturn]] void Fail(const std::string& what) {
  fprintf(stderr, "rendezvous_fuzz: invariant broken: %s\n", what.c_str());
  abort();
}

#define CHECK_OR_FAIL(cond, what) \
  if (!(cond)) Fail(absl::StrCat(#cond, ": ", what))

class Decoder {
 public:
  Decoder(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  int32_t Raw32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | Byte();
    return static_cast<int32_t>(v);
  }
  // Mostly -1..6; 1 in 16 a raw 32-bit value (negative, huge).
  int32_t Small() {
    uint8_t b = Byte();
    return b >= 0xF0 ? Raw32() : static_cast<int32_t>(b % 8) - 1;
  }
  std::string Text(size_t max) {
    size_t len = std::min<size_t>(Byte() % (max + 1), size_ - std::min(pos_, size_));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    // 7-bit: proto3 strings must be UTF-8, and every sender of these fields sends UTF-8
    // (agents' own text, error.json messages that passed a JSON parser).
    for (char& ch : s) ch = static_cast<char>(ch & 0x7f);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// ---- wire mode ----

std::string Bytes(const google::protobuf::Message& m) {
  std::string out;
  CHECK_OR_FAIL(m.SerializeToString(&out), m.GetTypeName());
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
      absl::StatusCode code = grpc_internal::ToAbslCode(server.error().code());
      CHECK_OR_FAIL(static_cast<int>(code) >= 0 && static_cast<int>(code) <= 16,
                    static_cast<int>(code));
      absl::Status status(code, server.error().message());
      absl::Status back = grpc_internal::ToAbslStatus(grpc_internal::ToGrpcStatus(status));
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

// ---- session mode ----

// One job as the registry holds it, plus what the invariants remember between steps.
struct Tracked {
  Tracked(const JobSpec& spec, absl::Time now) : job(spec, now) {}
  Job job;
  int round = 0;
  int restarts = 0;
  size_t history = 0;
  std::optional<Outcome> outcome;
  std::vector<NodeInfo> previous_round;  // participants of the last round started
};

// An agent's end of one stream.
struct Slot {
  std::string node_id;  // empty: no stream joined
  std::string run_id;
  int incarnation = 0;
  int round = 0;  // from its last assignment
  int rank_base = 0;
  int local_world_size = 0;
  std::optional<Event::Kind> last;  // last event that asks for an answer
};

std::string Ids(const std::vector<NodeInfo>& nodes) {
  std::string out;
  for (const NodeInfo& n : nodes) absl::StrAppend(&out, n.node_id, "(", n.rank_hint, ") ");
  return out;
}

class Session {
 public:
  explicit Session(Decoder* d) : d_(*d) {
    base_.run_id = "job";
    base_.min_nodes = 1 + d_.Byte() % 4;
    base_.max_nodes = base_.min_nodes + d_.Byte() % 3;
    base_.max_restarts = d_.Byte() % 4;
    base_.restart_after_success = d_.Byte() % 5 == 0;
    base_.join_timeout = absl::Seconds(1 + d_.Byte() % 20);
    base_.last_call_timeout = absl::Milliseconds(d_.Byte() % 4 * 500);
    base_.heartbeat_interval = absl::Seconds(1 + d_.Byte() % 3);
    base_.heartbeat_misses = 1 + d_.Byte() % 3;
    base_.stop_timeout = absl::Seconds(d_.Byte() % 8);
  }

  void Run() {
    for (int steps = 0; !d_.done() && steps < 400; ++steps) Step();
  }

 private:
  void Step() {
    uint8_t op = d_.Byte() % 12;
    Slot& slot = slots_[d_.Byte() % slots_.size()];
    if (trace_) {
      fprintf(stderr, "step op=%d slot=%d node=%s t=%s\n", op,
              static_cast<int>(&slot - slots_.data()), slot.node_id.c_str(),
              absl::FormatTime(now_).c_str());
    }
    v1::AgentMessage msg;
    switch (op) {
      case 0:
        FillJoin(slot, msg.mutable_join());
        break;
      case 1:
        msg.mutable_heartbeat();
        break;
      case 2: {
        v1::WorkerFailed* f = msg.mutable_worker_failed();
        f->set_round(RoundNear(slot));
        FillFailure(slot, f->mutable_failure());
        break;
      }
      case 3:
        msg.mutable_workers_succeeded()->set_round(RoundNear(slot));
        break;
      case 4:
        msg.mutable_workers_stopped()->set_round(RoundNear(slot));
        msg.mutable_workers_stopped()->set_store_port(Port());
        break;
      case 5:
        msg.mutable_leave()->set_why(d_.Text(8));
        break;
      case 6:
        Disconnect(slot);
        return;
      case 7:
        Advance();
        return;
      case 8:
        Respond(slot);
        return;
      case 9:
        for (Slot& s : slots_) Respond(s);
        return;
      case 10: {
        std::vector<StartedWorker> workers(d_.Byte() % 5);
        for (StartedWorker& w : workers) {
          w.local_rank = d_.Small();
          w.rank = d_.Small();
          w.pid = 1000 + d_.Byte();
        }
        ToProto(RoundNear(slot), workers, msg.mutable_workers_started());
        break;
      }
      default: {
        EndedWorker ended;
        ended.local_rank = d_.Small();
        ended.pid = 1000 + d_.Byte();
        uint8_t code = d_.Byte();
        ended.code = code % 4 == 0 ? 0 : 128 + code % 16;
        ended.signal = ended.code > 128 ? ended.code - 128 : 0;
        ended.stopped = code & 0x80;
        ended.what = "ended";
        ToProto(RoundNear(slot), ended, msg.mutable_worker_ended());
        break;
      }
    }
    Send(slot, msg);
  }

  int32_t Port() {
    uint8_t b = d_.Byte();
    return b >= 0xF0 ? d_.Raw32() : 20000 + b;
  }

  int RoundNear(const Slot& slot) {
    uint8_t b = d_.Byte();
    if (b >= 0xF0) return d_.Raw32();
    return slot.round + b % 3 - 1;
  }

  void FillJoin(const Slot& slot, v1::Join* join) {
    uint8_t which = d_.Byte();
    int index = static_cast<int>(&slot - slots_.data());
    JobSpec spec = base_;
    if (which % 8 == 7) spec.run_id = "other";
    switch (which / 8 % 8) {  // 0..3: the job's spec; else one field changed
      case 4:
        spec.min_nodes = d_.Small();
        spec.max_nodes = d_.Small();
        break;
      case 5:
        spec.max_restarts = d_.Small();
        spec.restart_after_success = !spec.restart_after_success;
        break;
      case 6:
        spec.heartbeat_misses = d_.Small();
        spec.heartbeat_interval = absl::Milliseconds(int64_t{d_.Small()} * 100);
        spec.stop_timeout = absl::Milliseconds(int64_t{d_.Small()} * 1000);
        break;
      case 7:
        spec.join_timeout = absl::Milliseconds(d_.Raw32());
        spec.last_call_timeout = absl::Milliseconds(int64_t{d_.Small()} * 1000);
        break;
      default:
        break;
    }
    NodeInfo node;
    node.wants_node_list = true;  // CheckRound checks every node's list
    uint8_t id = d_.Byte();
    if (id % 8 == 0) {  // another slot's id: a second stream for the same node
      node.node_id = slots_[id / 8 % slots_.size()].node_id;
    } else if (id % 8 == 1) {
      node.node_id = d_.Text(6);
    } else {
      node.node_id = absl::StrCat("n", index, ".", slot.incarnation + 1);
    }
    node.host = absl::StrCat("host", index);
    node.address = d_.Byte() % 4 == 0 ? "" : absl::StrCat("10.0.0.", index);
    uint8_t hint = d_.Byte();
    node.rank_hint = hint % 2 == 0 ? -1 : hint >= 0xF0 ? d_.Raw32() : hint / 2 % 8 - 1;
    uint8_t local = d_.Byte();
    node.local_world_size = local >= 0xF0 ? d_.Raw32() : local % 5;
    node.store_port = Port();
    ToProto(node, spec, join);
  }

  void FillFailure(const Slot& slot, v1::Failure* out) {
    Failure f;
    f.node_id = slot.node_id;
    f.host = "host";
    uint8_t code = d_.Byte();
    static constexpr int kCodes[] = {1, 137, 143, 130, 138, 2, 255, 0};
    f.code = code >= 0xF0 ? d_.Raw32() : kCodes[code % 8];
    f.restartable = (code / 8) % 2 == 1;
    f.rank = d_.Small();
    f.local_rank = d_.Small();
    f.pid = 4242;
    f.what = absl::StrCat("exit ", f.code);
    f.message = d_.Text(4);
    ToProto(f, out);
  }

  // A well-behaved agent's answer to the last event it got.
  void Respond(Slot& slot) {
    uint8_t b = d_.Byte();  // read even when unused, so that scripts stay aligned
    if (slot.node_id.empty()) return;
    v1::AgentMessage msg;
    switch (slot.last.value_or(Event::Kind::kProgress)) {
      case Event::Kind::kRoundStarted: {
        v1::AgentMessage started;  // an agent reports its workers' pids after spawning them
        std::vector<StartedWorker> workers;
        for (int local = 0; local < slot.local_world_size; ++local) {
          workers.push_back({local, slot.rank_base + local, 2000 + local});
        }
        ToProto(slot.round, workers, started.mutable_workers_started());
        Send(slot, started);
        if (slot.node_id.empty()) return;
        if (b % 3 == 0) {
          v1::WorkerFailed* f = msg.mutable_worker_failed();
          f->set_round(slot.round);
          Failure failure;
          failure.node_id = slot.node_id;
          failure.code = b % 2 ? 137 : 1;
          failure.restartable = b % 2 == 1;
          failure.what = "exit";
          ToProto(failure, f->mutable_failure());
        } else {
          msg.mutable_workers_succeeded()->set_round(slot.round);
        }
        break;
      }
      case Event::Kind::kStopWorkers:
        msg.mutable_workers_stopped()->set_round(slot.round);
        msg.mutable_workers_stopped()->set_store_port(30000 + slot.round);
        break;
      case Event::Kind::kFinished:
        msg.mutable_leave()->set_why("finished");
        break;
      case Event::Kind::kProgress:
        msg.mutable_heartbeat();
        break;
    }
    slot.last.reset();
    Send(slot, msg);
  }

  // The message travels as bytes, then is handled as AgentSession::Handle does.
  void Send(Slot& slot, const v1::AgentMessage& sent) {
    v1::AgentMessage msg;
    if (!msg.ParseFromString(Bytes(sent))) {  // the server's read fails: the stream ends
      Disconnect(slot);
      return;
    }
    if (slot.node_id.empty()) {
      if (msg.kind_case() == v1::AgentMessage::kJoin) Join(slot, msg.join());
      return;  // anything else first: refused, the stream ends
    }
    Tracked* t = JobOf(slot);
    if (t == nullptr) return;
    const std::string id = slot.node_id;
    std::vector<Event> events;
    Before(*t);
    switch (msg.kind_case()) {
      case v1::AgentMessage::kHeartbeat:
        t->job.Heartbeat(id, now_);
        break;
      case v1::AgentMessage::kWorkerFailed:
        t->job.WorkerFailed(id, msg.worker_failed().round(),
                            FromProto(msg.worker_failed().failure()), now_, &events);
        break;
      case v1::AgentMessage::kWorkersSucceeded:
        t->job.WorkersSucceeded(id, msg.workers_succeeded().round(), now_, &events);
        break;
      case v1::AgentMessage::kWorkersStopped:
        t->job.WorkersStopped(id, msg.workers_stopped().round(), msg.workers_stopped().store_port(),
                              now_, &events);
        break;
      case v1::AgentMessage::kWorkersStarted:
        t->job.WorkersStarted(id, msg.workers_started().round(), FromProto(msg.workers_started()),
                              now_);
        break;
      case v1::AgentMessage::kWorkerEnded:
        t->job.WorkerEnded(id, msg.worker_ended().round(), FromProto(msg.worker_ended()), now_);
        break;
      case v1::AgentMessage::kLeave:
        slot.node_id.clear();
        t->job.NodeLost(id, absl::StrCat("left: ", msg.leave().why()), now_, &events);
        break;
      default:  // a second Join is ignored; newer message kinds too
        break;
    }
    After(*t, events);
  }

  void Join(Slot& slot, const v1::Join& join) {
    NodeInfo node;
    JobSpec spec;
    FromProto(join, &node, &spec);
    node.wants_node_list = true;                           // CheckRound checks every node's list
    if (node.address.empty()) node.address = "192.0.2.1";  // the peer's address
    if (node.node_id.empty()) return;
    for (const Slot& s : slots_) {
      if (s.node_id == node.node_id) return;  // AlreadyExists: one stream per node id
    }
    auto it = jobs_.find(spec.run_id);
    if (it != jobs_.end() && it->second->job.phase() == Job::Phase::kFinished &&
        it->second->job.outcome()->exit_code == 138) {
      jobs_.erase(it);  // a transient end: restarted agents start the job afresh
      it = jobs_.end();
    }
    bool created = it == jobs_.end();
    if (created) {
      it = jobs_.emplace(spec.run_id, std::make_unique<Tracked>(spec, now_)).first;
    }
    Tracked& t = *it->second;
    std::vector<NodeInfo> nodes_before = t.job.Nodes();
    Job::Phase phase_before = t.job.phase();
    int round_before = t.job.round();
    Before(t);
    std::vector<Event> events;
    slot.node_id = node.node_id;  // routed before the call, as the registry does
    slot.run_id = spec.run_id;
    absl::Status joined = t.job.Join(node, spec, now_, &events);
    if (!joined.ok()) {
      slot.node_id.clear();
      CHECK_OR_FAIL(events.empty(), joined.ToString());
      CHECK_OR_FAIL(Ids(t.job.Nodes()) == Ids(nodes_before) && t.job.phase() == phase_before &&
                        t.job.round() == round_before,
                    absl::StrCat("a refused join changed the job: ", joined.ToString()));
      CHECK_OR_FAIL(joined.code() == absl::StatusCode::kInvalidArgument ||
                        joined.code() == absl::StatusCode::kFailedPrecondition,
                    joined.ToString());
      if (created) jobs_.erase(it);
      return;
    }
    ++slot.incarnation;
    slot.round = 0;
    slot.last.reset();
    After(t, events);
  }

  void Disconnect(Slot& slot) {
    if (slot.node_id.empty()) return;
    Tracked* t = JobOf(slot);
    std::string id = slot.node_id;
    slot.node_id.clear();
    if (t == nullptr) return;
    Before(*t);
    std::vector<Event> events;
    t->job.NodeLost(id, "stream closed", now_, &events);
    After(*t, events);
  }

  // The registry's timer: Tick every job whose deadline has come, then drop the streams of
  // the nodes a job declared lost.
  void Advance() {
    static constexpr int64_t kMs[] = {1, 100, 500, 1000, 2000, 5000, 16000, 61000};
    uint8_t b = d_.Byte();
    now_ += absl::Milliseconds(b >= 0xF0 ? static_cast<uint16_t>(d_.Raw32()) : kMs[b % 8]);
    for (auto& [run_id, tracked] : jobs_) {
      Tracked& t = *tracked;
      std::optional<absl::Time> due = t.job.NextDeadline();
      if (!due || *due > now_) continue;
      Before(t);
      std::vector<Event> events;
      t.job.Tick(now_, &events);
      After(t, events);
      std::optional<absl::Time> next = t.job.NextDeadline();
      CHECK_OR_FAIL(!next || *next > now_, absl::StrCat("Tick did not move a due deadline (phase ",
                                                        static_cast<int>(t.job.phase()), ")"));
      if (t.job.phase() == Job::Phase::kFinished) continue;
      std::set<std::string> live;
      for (const NodeInfo& n : t.job.Nodes()) live.insert(n.node_id);
      for (Slot& s : slots_) {
        if (!s.node_id.empty() && s.run_id == run_id && !live.count(s.node_id)) s.node_id.clear();
      }
    }
  }

  Tracked* JobOf(const Slot& slot) {
    auto it = jobs_.find(slot.run_id);
    return it == jobs_.end() ? nullptr : it->second.get();
  }

  void Before(Tracked& t) {
    finished_before_ = t.job.phase() == Job::Phase::kFinished;
    live_before_.clear();
    for (const NodeInfo& n : t.job.Nodes()) live_before_.insert(n.node_id);
  }

  // Invariants after one call on `t` that produced `events`.
  void After(Tracked& t, const std::vector<Event>& events) {
    const Job& job = t.job;
    const JobSpec& spec = job.spec();
    if (finished_before_) CHECK_OR_FAIL(events.empty(), "events after the job finished");

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
      CHECK_OR_FAIL(
          !parts.empty() && static_cast<int>(parts.size()) <= spec.max_nodes &&
              static_cast<int>(parts.size()) >= spec.min_nodes,
          absl::StrCat(parts.size(), " running of ", spec.min_nodes, ":", spec.max_nodes));
    }
    if (job.phase() == Job::Phase::kGathering) CHECK_OR_FAIL(parts.empty(), Ids(parts));

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

    CheckEvents(t, events, live_ids);
    // A node that is gone and joins again under the same id is a newcomer.
    std::erase_if(t.previous_round,
                  [&](const NodeInfo& n) { return live_ids.count(n.node_id) == 0; });
  }

  void CheckEvents(Tracked& t, const std::vector<Event>& events,
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

      if (e.kind == Event::Kind::kRoundStarted) rounds[e.assignment.round].push_back(&e);
      if (e.kind == Event::Kind::kFinished) {
        ++finished[e.node_id];
        CHECK_OR_FAIL(job.outcome() && e.outcome.exit_code == job.outcome()->exit_code,
                      "finished event vs outcome");
      }
      for (Slot& s : slots_) {
        if (s.node_id != e.node_id || s.run_id != job.spec().run_id) continue;
        if (e.kind == Event::Kind::kRoundStarted) {
          const Assignment& a = e.assignment;
          s.round = a.round;
          s.rank_base = a.rank_base;
          s.local_world_size = a.group_rank < static_cast<int>(a.nodes.size())
                                   ? a.nodes[a.group_rank].local_world_size
                                   : 1;
        }
        if (e.kind != Event::Kind::kProgress) s.last = e.kind;
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
  void CheckRound(Tracked& t, int round, const std::vector<const Event*>& started) {
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
      if (x.rank_hint < 0 && unhinted_in(t.previous_round, x.node_id))
        kept_now.push_back(x.node_id);
    }
    for (const NodeInfo& x : t.previous_round) {
      if (x.rank_hint < 0 && unhinted_in(order, x.node_id)) kept_before.push_back(x.node_id);
    }
    CHECK_OR_FAIL(kept_now == kept_before,
                  absl::StrCat("survivors reordered: ", Ids(t.previous_round), "-> ", Ids(order)));
    t.previous_round = order;
  }

  Decoder& d_;
  JobSpec base_;
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  std::array<Slot, 6> slots_;
  std::map<std::string, std::unique_ptr<Tracked>> jobs_;
  bool finished_before_ = false;
  std::set<std::string> live_before_;
  const bool trace_ = getenv("RENDEZVOUS_FUZZ_TRACE") != nullptr;  // steps and events
};

}  // namespace
}  // namespace muster::rdzv

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 is expected, not news
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 4 == 0) {
    muster::rdzv::WireRoundTrips(std::string(reinterpret_cast<const char*>(data + 1), size - 1));
    return 0;
  }
  muster::rdzv::Decoder d(data + 1, size - 1);
  muster::rdzv::Session session(&d);
  session.Run();
  return 0;
}
