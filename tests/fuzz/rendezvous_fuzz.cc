// libFuzzer target for the rendezvous server's request handling. Two modes, by the first
// byte:
//
//  - data[0] % 4 == 0, "wire": the rest is parsed as each muster.v1 message the server or
//    an agent decodes (AgentMessage, ServerMessage, JobStatusReply) and converted to plain
//    data and back (rendezvous/wire/proto_convert, status_convert); a second round trip
//    must give the same bytes as the first (WireRoundTrips).
//  - otherwise, "session": the rest is a script of agent messages (Join with varied specs,
//    rank hints, run ids and node ids; Heartbeat, WorkersStarted, WorkerEnded, WorkerFailed,
//    WorkersSucceeded, WorkersStopped, Leave; disconnects; well-behaved replies to the last
//    event) from six agent slots, and fake-clock advances. Every message goes through its
//    proto encoding and is dispatched as grpc/agent_session.cc and registry/job_registry.cc
//    do (one rdzv::Job per run id, created by its first Join), and every event the jobs
//    emit is converted to a ServerMessage and back. After each step the invariants of
//    JobChecker (rendezvous_fuzz_checks.h) must hold: ranks a permutation with consistent
//    bases, survivors keep their order, rank hints honoured, restart count monotonic and
//    equal to the counted history, the outcome final once set, nothing sent after the end,
//    deadlines that move when they fire, worker status that follows the layout whatever
//    agents report, no quarantined host in a round, spares within --spares.
//
// Session script: a header (spec of the job most agents agree on, --quarantine-after and
// --spares included: a slot's agents all run on one host and report failures there, so
// the bad-node memory quarantines hosts and spares take their places), then one opcode byte
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
#include "base/exit_codes.h"
#include "muster/v1/rendezvous.pb.h"
#include "rendezvous/core/job.h"
#include "rendezvous/wire/proto_convert.h"
#include "tests/fuzz/rendezvous_fuzz_checks.h"

namespace muster::rdzv::fuzz {
namespace {

using wire::FromProto;
using wire::ToProto;

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

// An agent's end of one stream.
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

class Session {
 public:
  explicit Session(Decoder* d) : d_(*d) {
    base_.run_id = "job";
    // The upper parts of the first two bytes choose --quarantine-after (0..3) and --spares
    // (0..2): no byte more, so the committed seeds (small bytes: 0, 0) keep their meaning.
    const uint8_t min_byte = d_.Byte();
    base_.min_nodes = 1 + min_byte % 4;
    base_.quarantine_after = min_byte / 4 % 4;
    const uint8_t max_byte = d_.Byte();
    base_.max_nodes = base_.min_nodes + max_byte % 3;
    base_.spares = max_byte / 3 % 3;
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

  // A slot's agents all run on one host (a restarted agent comes back on its machine).
  std::string HostOf(const Slot& slot) const { return absl::StrCat("host", &slot - slots_.data()); }

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
    node.host = HostOf(slot);
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
    uint8_t code = d_.Byte();
    // Mostly the node's own host, as an agent reports it, so that the bad-node memory counts
    // it (quarantine); now and then a host no node of the job runs on.
    f.host = code / 16 % 4 == 0 ? "host" : HostOf(slot);
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
          workers.push_back(StartedWorker{
              .local_rank = local, .rank = slot.rank_base + local, .pid = 2000 + local});
        }
        ToProto(slot.round, workers, started.mutable_workers_started());
        Send(slot, started);
        if (slot.node_id.empty()) return;
        if (b % 7 == 6) {  // a spot notice: the job tells every node, then this one leaves
          msg.mutable_preempt()->set_reason(d_.Text(4));
        } else if (b % 3 == 0) {
          v1::WorkerFailed* f = msg.mutable_worker_failed();
          f->set_round(slot.round);
          Failure failure;
          failure.node_id = slot.node_id;
          failure.host = HostOf(slot);
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
      case Event::Kind::kPreempt:    // workers checkpoint; the job's next word follows
      case Event::Kind::kTraces:     // where the dumps are; nothing to answer
      case Event::Kind::kStraggler:  // a rank named; nothing to answer
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
        it->second->job.outcome()->exit_code == exit_code::kTransient) {
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

  void Before(const Tracked& t) { checker_.Before(t); }

  // Checks the call's invariants, then hands its events to the slots they address.
  void After(Tracked& t, const std::vector<Event>& events) {
    checker_.After(t, events);
    for (const Event& e : events) {
      for (Slot& s : slots_) {
        if (s.node_id != e.node_id || s.run_id != t.job.spec().run_id) continue;
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
  }

  Decoder& d_;
  JobSpec base_;
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  std::array<Slot, 6> slots_;
  std::map<std::string, std::unique_ptr<Tracked>> jobs_;
  const bool trace_ = getenv("RENDEZVOUS_FUZZ_TRACE") != nullptr;  // steps and events
  JobChecker checker_{trace_};
};

}  // namespace
}  // namespace muster::rdzv::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 is expected, not news
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 4 == 0) {
    muster::rdzv::fuzz::WireRoundTrips(
        std::string(reinterpret_cast<const char*>(data + 1), size - 1));
    return 0;
  }
  muster::rdzv::fuzz::Decoder d(data + 1, size - 1);
  muster::rdzv::fuzz::Session session(&d);
  session.Run();
  return 0;
}
