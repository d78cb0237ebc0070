// etcd_light_agents: M simulated agents of the etcd rendezvous backend in one process, the
// light client of bench/b2_etcd.py. Each speaks the agents' protocol (rendezvous/etcd,
// docs/guides/etcd.md): its own lease (kept alive), the coordinator read from the key
// naming it (else the oldest node key: rendezvous/etcd/election.h), its node key put ready for that
// coordinator, a watch of its own events key (to/NODE_ID), one of requests/ and one of the
// coordinator's node key (deletions only): a real agent's three; a StopWorkers is answered at once
// with a WorkersStopped report under in/NODE_ID/SEQ. When the coordinator's key goes, an agent
// follows the successor the coordinator's batches named after one read of its key, else reads as
// at its join (election.h's FindNextCoordinator); `--on-coordinator-loss oldest` does what agents
// did before successors: the coordinator key, then the oldest node key. They do not coordinate: a
// real agent (rdzv_agents --agents 1, started first, so its key is the oldest) does, in a process
// of its own whose CPU is measured apart; for a fail-over, a second one started next succeeds it.
//
// No thread per agent: one channel, one completion queue read by the main thread, every
// agent's watches on one Watch stream (etcd multiplexes watch ids), every keep-alive on
// one LeaseKeepAlive stream.
//
//   etcd_light_agents --endpoint H:P --agents M [--min N] [--max N] [--run-id ID]
//                     [--prefix P] [--ttl-s T] [--timeout-s T] [--rounds R]
//                     [--on-coordinator-loss successor|oldest]
//
// Exits once every agent has seen R rounds start (default 1). stderr: "round R t=SECONDS"
// when every agent has seen round R start (CLOCK_MONOTONIC), as rdzv_agents. stdout: one
// JSON line as rdzv_agents' ({"agents", "start", "ok", "rounds", "round_ms",
// "client_cpu_s"}) with the phases of the join: every lease granted (leases_ms), the
// coordinator read (read_ms), every node key put (joined_ms), from the start.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/helpers/agent_bench_args.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "muster/v1/etcd.pb.h"
#include "rendezvous/wire/proto_convert.h"

namespace {

namespace pb = ::etcdserverpb;

struct Args {
  std::string endpoint;
  std::string run_id = "b2";
  std::string prefix = "/muster";
  int agents = 16;
  int min = 0;  // 0: agents + 1 (the coordinator's own agent)
  int max = 0;
  int ttl_s = 15;
  int timeout_s = 120;
  int rounds = 1;
  std::string on_loss = "successor";  // or "oldest"
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "etcd_light_agents: %s\n", why.c_str());
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  std::map<std::string, int*> ints = {{"--agents", &a.agents},
                                      {"--min", &a.min},
                                      {"--max", &a.max},
                                      {"--ttl-s", &a.ttl_s},
                                      {"--timeout-s", &a.timeout_s},
                                      {"--rounds", &a.rounds}};
  std::map<std::string, std::string*> strings = {{"--endpoint", &a.endpoint},
                                                 {"--run-id", &a.run_id},
                                                 {"--prefix", &a.prefix},
                                                 {"--on-coordinator-loss", &a.on_loss}};
  muster::bench::ParseFlagPairs(argc, argv, ints, strings, Usage);
  if (a.endpoint.empty() || a.agents < 1) Usage("give --endpoint and --agents >= 1");
  if (a.rounds < 1) Usage("--rounds takes a number >= 1");
  if (a.on_loss != "successor" && a.on_loss != "oldest") {
    Usage("--on-coordinator-loss takes successor or oldest");
  }
  if (a.min == 0) a.min = a.agents + 1;
  if (a.max == 0) a.max = a.min;
  return a;
}

double Mono() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// A completion queue tag: what to do when its operation completes.
struct Tag {
  std::function<void(bool ok)> fn;
};

// One unary call; deletes itself once done.
template <typename Resp>
struct Unary {
  Tag tag;
  grpc::ClientContext ctx;
  Resp resp;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Resp>> rpc;
};

// A bidi stream whose writes are queued (one in flight, as gRPC requires) and whose every
// read goes to `on_read`; its end (etcd closed it, e.g. a keep-alive it could not forward to
// its leader) goes to `on_end` with the stream's name.
template <typename Req, typename Resp>
class Bidi {
 public:
  using Start = std::function<std::unique_ptr<grpc::ClientAsyncReaderWriter<Req, Resp>>(
      grpc::ClientContext*, void*)>;
  Bidi(std::string name, const Start& start, std::function<void(const Resp&)> on_read,
       std::function<void(const std::string&)> on_end)
      : name_(std::move(name)), on_read_(std::move(on_read)), on_end_(std::move(on_end)) {
    started_.fn = [this](bool ok) {
      if (!ok) return End("did not start");
      open_ = true;
      stream_->Read(&resp_, &read_);
      Flush();
    };
    read_.fn = [this](bool ok) {
      if (!ok) return End("ended");
      on_read_(resp_);
      stream_->Read(&resp_, &read_);
    };
    wrote_.fn = [this](bool ok) {
      if (!ok) return End("write failed");
      writing_ = false;
      Flush();
    };
    stream_ = start(&ctx_, &started_);
  }
  void Write(Req req) {
    queue_.push_back(std::move(req));
    Flush();
  }
  bool ended() const { return ended_; }

 private:
  void End(const char* what) {
    if (ended_) return;
    ended_ = true;
    on_end_(absl::StrCat(name_, " stream ", what));
  }
  void Flush() {
    if (!open_ || ended_ || writing_ || queue_.empty()) return;
    writing_ = true;
    pending_ = std::move(queue_.front());
    queue_.pop_front();
    stream_->Write(pending_, &wrote_);
  }
  const std::string name_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<Req, Resp>> stream_;
  std::function<void(const Resp&)> on_read_;
  std::function<void(const std::string&)> on_end_;
  Tag started_, read_, wrote_;
  Resp resp_;
  Req pending_;
  std::deque<Req> queue_;
  bool open_ = false;
  bool writing_ = false;
  bool ended_ = false;
};

struct Agent {
  std::string id;
  int64_t lease = 0;
  std::string leader;
  int64_t leader_seq = 0;
  std::string successor;  // as the coordinator's last batch named it
  int64_t successor_revision = 0;
  int round = 0;
  int reports = 0;
  int seen = 0;  // rounds started
};

struct RoundTimes {
  size_t agents = 0;
  double first = 0, last = 0;
};

class LightAgents {
 public:
  LightAgents(const Args& a, std::shared_ptr<grpc::Channel> channel)
      : args_(a),
        job_(absl::StrCat(a.prefix, "/", a.run_id, "/")),
        kv_(pb::KV::NewStub(channel)),
        lease_(pb::Lease::NewStub(channel)),
        watch_stub_(pb::Watch::NewStub(channel)) {
    agents_.resize(a.agents);
    for (int i = 0; i < a.agents; ++i) agents_[i].id = absl::StrCat("light:", getpid(), ":", i);
    watch_ = std::make_unique<Bidi<pb::WatchRequest, pb::WatchResponse>>(
        "watch",
        [this](grpc::ClientContext* c, void* tag) { return watch_stub_->AsyncWatch(c, &cq_, tag); },
        [this](const pb::WatchResponse& r) { OnWatch(r); },
        [this](const std::string& why) { error_ = why; });
    OpenKeepAlive();
  }

  // A keep-alive stream that etcd ended is opened again at the next keep-alive (as the
  // agents' LeaseKeeper retries); the old one stays until exit (its tags may be pending).
  void OpenKeepAlive() {
    keep_alive_ = std::make_unique<Bidi<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>>(
        "keep-alive",
        [this](grpc::ClientContext* c, void* tag) {
          return lease_->AsyncLeaseKeepAlive(c, &cq_, tag);
        },
        [](const pb::LeaseKeepAliveResponse&) {},
        [this](const std::string& why) {
          std::fprintf(stderr, "etcd_light_agents: %s; opening another\n", why.c_str());
          ++keep_alive_reopened_;
        });
  }

  // Runs until every agent saw a round start, one failed, or the timeout; true: all did.
  bool Run() {
    start_ = Mono();
    for (size_t i = 0; i < agents_.size(); ++i) Grant(i);
    const absl::Time deadline = absl::Now() + absl::Seconds(args_.timeout_s);
    absl::Time keep_due = absl::Now() + absl::Seconds(args_.ttl_s) / 3;
    while (done_ < agents_.size() && error_.empty()) {
      void* tag = nullptr;
      bool ok = false;
      const absl::Time wake = std::min(deadline, keep_due);
      auto got = cq_.AsyncNext(&tag, &ok, absl::ToChronoTime(wake));
      if (got == grpc::CompletionQueue::SHUTDOWN) break;
      if (got == grpc::CompletionQueue::GOT_EVENT) static_cast<Tag*>(tag)->fn(ok);
      if (absl::Now() >= keep_due) {
        KeepAlive();
        keep_due = absl::Now() + absl::Seconds(args_.ttl_s) / 3;
      }
      if (absl::Now() >= deadline && error_.empty()) error_ = "timed out";
    }
    return done_ == agents_.size();
  }

  std::string Json(double cpu) const {
    const bool ok = done_ == agents_.size();
    std::string out =
        absl::StrCat("{\"agents\": ", agents_.size(),
                     ", \"backend\": \"etcd-light\", \"start\": ", absl::StrFormat("%.6f", start_),
                     ", \"ok\": ", ok ? "true" : "false", ", \"rounds\": [");
    for (const auto& [n, r] : rounds_) {
      absl::StrAppend(&out, n > 1 ? ", " : "", "{\"round\": ", n, ", \"agents\": ", r.agents,
                      ", \"first\": ", absl::StrFormat("%.6f", r.first),
                      ", \"last\": ", absl::StrFormat("%.6f", r.last), "}");
    }
    const bool all_first = rounds_.count(1) && rounds_.at(1).agents == agents_.size();
    absl::StrAppend(&out, "], \"round_ms\": ", all_first ? (rounds_.at(1).last - start_) * 1e3 : -1,
                    ", \"leases_ms\": ", (granted_at_ - start_) * 1e3,
                    ", \"read_ms\": ", (read_at_ - start_) * 1e3,
                    ", \"joined_ms\": ", (joined_at_ - start_) * 1e3, ", \"client_cpu_s\": ", cpu,
                    ", \"keep_alive_streams_reopened\": ", keep_alive_reopened_,
                    ", \"on_coordinator_loss\": \"", args_.on_loss, "\"");
    if (!error_.empty()) absl::StrAppend(&out, ", \"error\": \"", error_, "\"");
    return out + "}";
  }

 private:
  template <typename Resp>
  using Done = std::function<void(const grpc::Status&, const Resp&)>;

  // Starts a unary call (`start` returns its reader) and runs `done` once it completes.
  template <typename Resp, typename Startf>
  void Call(Startf start, Done<Resp> done) {
    auto* u = new Unary<Resp>;
    u->ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    u->tag.fn = [u, done = std::move(done)](bool) {
      done(u->status, u->resp);
      delete u;
    };
    u->rpc = start(&u->ctx);
    u->rpc->Finish(&u->resp, &u->status, &u->tag);
  }

  bool Failed(const grpc::Status& s, const char* what) {
    if (s.ok()) return false;
    if (error_.empty()) error_ = absl::StrCat(what, ": ", s.error_message());
    return true;
  }

  void Grant(size_t i) {
    pb::LeaseGrantRequest req;
    req.set_ttl(args_.ttl_s);
    Call<pb::LeaseGrantResponse>(
        [&](grpc::ClientContext* c) { return lease_->AsyncLeaseGrant(c, req, &cq_); },
        [this, i](const grpc::Status& s, const pb::LeaseGrantResponse& r) {
          if (Failed(s, "lease grant")) return;
          agents_[i].lease = r.id();
          if (++granted_ == agents_.size()) granted_at_ = Mono();
          FindCoordinator(i);
        });
  }

  // The coordinator (rendezvous/etcd/election.h): the key naming it, else the oldest node
  // key; then (at the join) the watches and the node key, or (`again`: the coordinator
  // changed) the new one's key watched and the node key put ready for it.
  void FindCoordinator(size_t i, bool again = false) {
    pb::RangeRequest req;
    req.set_key(job_ + "coordinator");
    Call<pb::RangeResponse>([&](grpc::ClientContext* c) { return kv_->AsyncRange(c, req, &cq_); },
                            [this, i, again](const grpc::Status& s, const pb::RangeResponse& r) {
                              if (Failed(s, "get")) return;
                              if (r.kvs().empty()) return FindOldest(i, again);
                              Found(i, again, r.kvs(0).value(), r.header().revision());
                            });
  }

  void Found(size_t i, bool again, const std::string& leader, int64_t revision) {
    if (again) return Switch(i, leader, revision);
    Follow(i, leader, revision);
  }

  void FindOldest(size_t i, bool again) {
    pb::RangeRequest req;
    req.set_key(job_ + "nodes/");
    req.set_range_end(job_ + "nodes0");  // PrefixEnd of "nodes/"
    req.set_limit(1);
    req.set_sort_order(pb::RangeRequest::ASCEND);
    req.set_sort_target(pb::RangeRequest::CREATE);
    Call<pb::RangeResponse>([&](grpc::ClientContext* c) { return kv_->AsyncRange(c, req, &cq_); },
                            [this, i, again](const grpc::Status& s, const pb::RangeResponse& r) {
                              if (Failed(s, "range")) return;
                              if (r.kvs().empty()) {
                                error_ = "no coordinator: start rdzv_agents --agents 1 first";
                                return;
                              }
                              const std::string& key = r.kvs(0).key();
                              Found(i, again, key.substr(key.rfind('/') + 1),
                                    r.header().revision());
                            });
  }

  // The join's watches (a real agent's three) and node key.
  void Follow(size_t i, const std::string& leader, int64_t revision) {
    if (++read_ == agents_.size()) read_at_ = Mono();
    Agent& a = agents_[i];
    a.leader = leader;
    AddWatch(job_ + "to/" + a.id, revision + 1, "", [this, i](const auto& e) { OnEvents(i, e); });
    AddWatch(job_ + "requests/", revision + 1, job_ + "requests0", [](const auto&) {});
    WatchLeader(i, revision);
    PutNode(i);
  }

  // The coordinator's node key, for its deletion (the watch stays: a key deleted once is
  // not deleted again, and a later coordinator's deletion goes to that one's watch).
  void WatchLeader(size_t i, int64_t revision) {
    const std::string leader = agents_[i].leader;
    AddWatch(
        job_ + "nodes/" + leader, revision + 1, "",
        [this, i, leader](const auto& events) {
          for (const mvccpb::Event& e : events) {
            if (e.type() == mvccpb::Event::DELETE && agents_[i].leader == leader) {
              return LeaderLost(i);
            }
          }
        },
        /*deletes_only=*/true);
  }

  // The coordinator's key is gone: its successor after one read (election.h), else (or with
  // --on-coordinator-loss oldest) as at the join.
  void LeaderLost(size_t i) {
    Agent& a = agents_[i];
    if (args_.on_loss == "oldest" || a.successor.empty() || a.successor == a.leader) {
      return FindCoordinator(i, /*again=*/true);
    }
    pb::RangeRequest req;
    req.set_key(job_ + "nodes/" + a.successor);
    Call<pb::RangeResponse>(
        [&](grpc::ClientContext* c) { return kv_->AsyncRange(c, req, &cq_); },
        [this, i](const grpc::Status& s, const pb::RangeResponse& r) {
          if (Failed(s, "get")) return;
          Agent& a = agents_[i];
          if (r.kvs().empty() || r.kvs(0).create_revision() != a.successor_revision) {
            return FindCoordinator(i, /*again=*/true);
          }
          Switch(i, a.successor, r.header().revision());
        });
  }

  // A new coordinator: its key watched, this agent's put ready for it (no workers to stop).
  void Switch(size_t i, const std::string& leader, int64_t revision) {
    Agent& a = agents_[i];
    if (leader == a.leader) return;
    a.leader = leader;
    a.leader_seq = 0;
    WatchLeader(i, revision);
    PutNode(i);
  }

  void PutNode(size_t i) {
    Agent& a = agents_[i];
    muster::v1::EtcdNode node;
    node.set_ready_for(a.leader);
    muster::rdzv::NodeInfo info{.node_id = a.id,
                                .host = "light",
                                .address = "127.0.0.1",
                                .store_port = 20000 + static_cast<int>(i % 40000)};
    muster::rdzv::JobSpec spec{.run_id = args_.run_id,
                               .min_nodes = args_.min,
                               .max_nodes = args_.max,
                               .join_timeout = absl::Seconds(args_.timeout_s),
                               .heartbeat_interval = absl::Seconds(args_.ttl_s) / 3,
                               .heartbeat_misses = 3};
    muster::rdzv::wire::ToProto(info, spec, node.mutable_join());
    Put(job_ + "nodes/" + a.id, node.SerializeAsString(), a.lease, [this] {
      if (++joined_ == agents_.size()) joined_at_ = Mono();
    });
  }

  void Put(const std::string& key, const std::string& value, int64_t lease,
           std::function<void()> then) {
    pb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    req.set_lease(lease);
    Call<pb::PutResponse>([&](grpc::ClientContext* c) { return kv_->AsyncPut(c, req, &cq_); },
                          [this, then](const grpc::Status& s, const pb::PutResponse&) {
                            if (!Failed(s, "put")) then();
                          });
  }

  using OnEventsFn = std::function<void(const google::protobuf::RepeatedPtrField<mvccpb::Event>&)>;

  // Watch creations are answered in order on the stream: the next answer names the id.
  void AddWatch(const std::string& key, int64_t from, const std::string& range_end, OnEventsFn fn,
                bool deletes_only = false) {
    pb::WatchRequest req;
    pb::WatchCreateRequest* create = req.mutable_create_request();
    create->set_key(key);
    if (!range_end.empty()) create->set_range_end(range_end);
    create->set_start_revision(from);
    if (deletes_only) create->add_filters(pb::WatchCreateRequest::NOPUT);
    creating_.push_back(std::move(fn));
    watch_->Write(std::move(req));
  }

  void OnWatch(const pb::WatchResponse& r) {
    if (r.created()) {
      if (creating_.empty()) return;
      watches_[r.watch_id()] = std::move(creating_.front());
      creating_.pop_front();
    }
    if (r.canceled()) error_ = absl::StrCat("watch cancelled: ", r.cancel_reason());
    if (r.events().empty()) return;
    auto it = watches_.find(r.watch_id());
    if (it != watches_.end()) it->second(r.events());
  }

  void OnEvents(size_t i, const google::protobuf::RepeatedPtrField<mvccpb::Event>& events) {
    Agent& a = agents_[i];
    for (const mvccpb::Event& e : events) {
      muster::v1::EtcdEvents batch;
      if (e.type() != mvccpb::Event::PUT || !batch.ParseFromString(e.kv().value())) continue;
      if (batch.coordinator() != a.leader || batch.seq() <= a.leader_seq) continue;
      a.leader_seq = batch.seq();
      a.successor = batch.successor();
      a.successor_revision = batch.successor_revision();
      for (const auto& addressed : batch.events()) {
        if (addressed.node_id() == a.id) Deliver(i, addressed.message());
      }
    }
  }

  void Deliver(size_t i, const muster::v1::ServerMessage& m) {
    Agent& a = agents_[i];
    if (m.has_error()) error_ = absl::StrCat(a.id, " refused: ", m.error().message());
    if (m.has_finished()) error_ = "the job finished";
    if (m.has_stop_workers()) Report(i);
    if (!m.has_round_started()) return;
    a.round = m.round_started().assignment().round();
    const int n = ++a.seen;  // rounds counted as rdzv_agents does: by the order seen
    RoundTimes& r = rounds_[n];
    const double now = Mono();
    if (r.agents++ == 0) r.first = now;
    r.last = now;
    if (r.agents == agents_.size()) std::fprintf(stderr, "round %d t=%.6f\n", n, now);
    if (n == args_.rounds) ++done_;
  }

  // WorkersStopped at once (no workers): ready for the next round.
  void Report(size_t i) {
    Agent& a = agents_[i];
    muster::v1::EtcdReport report;
    report.set_to(a.leader);
    report.mutable_message()->mutable_workers_stopped()->set_round(a.round);
    report.mutable_message()->mutable_workers_stopped()->set_store_port(20000 + i % 40000);
    Put(absl::StrFormat("%sin/%s/%08d", job_, a.id, ++a.reports), report.SerializeAsString(),
        a.lease, [] {});
  }

  void KeepAlive() {
    if (keep_alive_->ended()) {
      ended_keep_alives_.push_back(std::move(keep_alive_));
      OpenKeepAlive();
    }
    for (const Agent& a : agents_) {
      if (a.lease == 0) continue;
      pb::LeaseKeepAliveRequest req;
      req.set_id(a.lease);
      keep_alive_->Write(std::move(req));
    }
  }

  const Args args_;
  const std::string job_;  // PREFIX/RUN_ID/
  grpc::CompletionQueue cq_;
  std::unique_ptr<pb::KV::Stub> kv_;
  std::unique_ptr<pb::Lease::Stub> lease_;
  std::unique_ptr<pb::Watch::Stub> watch_stub_;
  std::unique_ptr<Bidi<pb::WatchRequest, pb::WatchResponse>> watch_;
  std::unique_ptr<Bidi<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>> keep_alive_;
  std::vector<std::unique_ptr<Bidi<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>>>
      ended_keep_alives_;
  int keep_alive_reopened_ = 0;
  std::deque<OnEventsFn> creating_;
  std::map<int64_t, OnEventsFn> watches_;
  std::vector<Agent> agents_;
  std::map<int, RoundTimes> rounds_;  // by the order of rounds seen (1, 2, ...)
  size_t done_ = 0;                   // agents that saw --rounds rounds start
  size_t joined_ = 0, granted_ = 0, read_ = 0;
  double start_ = 0, joined_at_ = 0, granted_at_ = 0, read_at_ = 0;
  std::string error_;
};

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(-1);
  auto channel =
      grpc::CreateCustomChannel(a.endpoint, grpc::InsecureChannelCredentials(), channel_args);
  LightAgents agents(a, channel);
  const double cpu0 = muster::bench::CpuSeconds();
  const bool ok = agents.Run();
  std::printf("%s\n", agents.Json(muster::bench::CpuSeconds() - cpu0).c_str());
  std::fflush(stdout);
  _exit(ok ? 0 : 1);  // leaving (revokes, stream ends) is not measured
}
