#include "rendezvous/etcd/etcd_rendezvous.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "base/mutex.h"
#include "muster/v1/etcd.pb.h"
#include "rendezvous/etcd/coordinator.h"
#include "rendezvous/etcd/coordinator_inbox.h"
#include "rendezvous/etcd/election.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/etcd/etcd_reports.h"
#include "rendezvous/etcd/lease_keeper.h"
#include "rendezvous/etcd/liveness.h"
#include "rendezvous/etcd/watch_threads.h"
#include "rendezvous/wire/proto_convert.h"
#include "rendezvous/wire/stacks_convert.h"
#include "rendezvous/wire/status_convert.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {

using wire::FromProto;
using wire::ToProto;

class EtcdRendezvousClient::Impl {
 public:
  Impl(Options options, std::unique_ptr<EtcdClient> etcd, std::unique_ptr<EventLoop> brain)
      : options_(std::move(options)), etcd_(std::move(etcd)), brain_loop_(std::move(brain)) {
    reply_route_->impl = this;
  }
  // Runs on the loop thread (the agent owns the client): posted sinks after it are dropped.
  ~Impl() {
    *alive_ = false;
    {
      MutexLock lock(&reply_route_->mu);
      reply_route_->impl = nullptr;  // stacks still being collected answer nothing
    }
    Shutdown();
  }

  void Start(const NodeInfo& node, const JobSpec& spec, EventSink events, ErrorSink errors) {
    node_ = node;
    spec_ = spec;
    events_ = std::move(events);
    errors_ = std::move(errors);
    prefix_ = absl::StrCat(options_.prefix, "/", spec.run_id, "/");
    ttl_ = spec.heartbeat_interval * spec.heartbeat_misses;
    brain_ = std::thread([this] { RunBrain(); });
    Enqueue([this] { Join(); });
  }

  void Report(v1::AgentMessage message) {
    Enqueue([this, m = std::move(message)] { SendReport(m); });
  }

  // The verdict goes in this agent's node key too, so that a coordinator that takes over
  // reads the latest one from the Join it finds there.
  void Health(const std::string& excluded) {
    Enqueue([this, excluded] {
      node_.excluded = excluded;
      v1::AgentMessage m;
      m.mutable_health()->set_excluded(excluded);
      SendReport(m);
    });
  }

  void Stopped(int round, int store_port) {
    Enqueue([this, round, store_port] {
      node_.store_port = store_port;
      in_round_ = false;
      if (!handover_) {
        v1::AgentMessage m;
        m.mutable_workers_stopped()->set_round(round);
        m.mutable_workers_stopped()->set_store_port(store_port);
        SendReport(m);
        return;
      }
      handover_ = false;
      PutSelf();  // ready for the coordinator that took over
    });
  }

  // Where each dump stays (HOST:PATH), not its data (etcd_reports.h).
  void ReportTraces(std::vector<TraceChunk> chunks) {
    Enqueue([this, chunks = std::move(chunks)] { SendReport(TracesReport(node_.host, chunks)); });
  }

  void Leave(const std::string& why) {
    spdlog::info("etcd rendezvous: leaving ({})", why);
    if (brain_.joinable()) LeaveAsCoordinator();
    Shutdown();
  }

  // A preempted coordinator tells its own Job that it goes before its key does: the Job
  // knows of the preemption (a fixed-size job ends with 143), a next coordinator would not.
  // Waits for the brain at most a lease TTL (the publish's own bound).
  void LeaveAsCoordinator() {
    auto done = std::make_shared<absl::Notification>();
    Enqueue([this, done] {
      if (coordinator_ && !failed_) coordinator_->PreemptedSelfLeaves(node_.node_id, absl::Now());
      done->Notify();
    });
    done->WaitForNotificationWithTimeout(ttl_);
  }

 private:
  // ---- the brain: its own reactor (base/event_loop.h, docs/design.md §2.1), one task at a time,
  // and the coordinator's deadlines ----

  // A task posted before the client stops and run after is dropped, as it would be unrun.
  void Enqueue(std::function<void()> task) {
    brain_loop_->Post([this, task = std::move(task)] {
      if (!brain_loop_->quitting()) task();
    });
  }

  // The tasks block in etcd calls (each bounded by the lease TTL): this loop serves
  // nothing else, so a slow call delays only the brain's next task, as a queue would.
  void RunBrain() {
    while (!brain_loop_->quitting()) {
      std::optional<absl::Time> due = coordinator_ ? coordinator_->NextDeadline() : std::nullopt;
      const absl::Duration wait = due && *due != absl::InfiniteFuture()
                                      ? std::max(absl::ZeroDuration(), *due - absl::Now())
                                      : absl::InfiniteDuration();
      if (absl::Status ran = brain_loop_->RunOnce(wait); !ran.ok()) {
        return Fail(
            absl::InternalError(absl::StrCat("the etcd rendezvous stopped: ", ran.message())));
      }
      if (brain_loop_->quitting() || !coordinator_) continue;
      due = coordinator_->NextDeadline();
      if (due && absl::Now() >= *due) coordinator_->Tick(absl::Now());
    }
  }

  void Join() { JoinBy(absl::Now() + options_.join_timeout); }

  // One try at the lease; with etcd out of reach, another a second later (a timer of the
  // brain's loop) until `deadline`.
  void JoinBy(absl::Time deadline) {
    if (brain_loop_->quitting()) return;
    const absl::Time granted = absl::Now();
    absl::StatusOr<int64_t> lease = etcd_->GrantLease(ttl_);
    if (!lease.ok()) {
      // Credentials or certificates etcd refuses: no retry mends them (exit 2).
      if (IsPermanentEtcdError(lease.status())) return Fail(lease.status());
      spdlog::warn("etcd rendezvous: cannot reach etcd ({}); retrying until the join timeout",
                   std::string(lease.status().message()));
      if (absl::Now() >= deadline) {
        return Fail(absl::UnavailableError(absl::StrCat(
            "etcd at ", absl::StrJoin(options_.endpoints, ","),
            " unreachable for the join timeout (", absl::FormatDuration(options_.join_timeout),
            "): ", lease.status().message(), TlsHint(options_.security))));
      }
      brain_loop_->AddTimer(EventLoop::Now() + absl::Seconds(1),
                            [this, deadline] { JoinBy(deadline); });
      return;
    }
    lease_ = *lease;
    keeper_ = std::make_unique<LeaseKeeper>(etcd_.get(), lease_, ttl_, granted,
                                            [this](const RendezvousError& lost) { Fail(lost); });
    // The coordinator known before the put, the node key is put ready for it at once (one
    // put per node); new keys are younger, so only its deletion changes the election.
    absl::StatusOr<Elected> found = FindCoordinator(*etcd_, prefix_, garbage_);
    if (!found.ok()) return FailOnEtcd(found.status());
    leader_ = found->node_id;
    if (!leader_.empty()) spdlog::info("etcd rendezvous: coordinator {}", leader_);
    StartLiveness();
    int64_t put = 0;
    if (!PutSelf(&put)) return;
    // Only this node's events key and the requests: no other node's traffic.
    AddWatch(prefix_ + "to/" + node_.node_id, found->revision + 1, {.prefix = false},
             [this](const std::vector<WatchEvent>& events) { ApplyOwnEvents(events); });
    AddWatch(prefix_ + "requests/", found->revision + 1, {},
             [this](const std::vector<WatchEvent>& events) { ApplyRequests(events); });
    spdlog::info("etcd rendezvous: joined {} through {} (lease {:x}, TTL {})", prefix_,
                 etcd_->current_endpoint(), lease_, absl::FormatDuration(ttl_));
    if (leader_.empty()) return Elect(put);
    WatchLeader(found->revision);
    FollowLeader();
  }

  // Puts this agent's node key, ready for leader_ (or for none yet); `revision`: the
  // store's after it.
  bool PutSelf(int64_t* revision = nullptr) {
    v1::EtcdNode value;
    value.set_ready_for(leader_);
    ToProto(node_, spec_, value.mutable_join());
    if (liveness_) value.set_liveness(liveness_->address());
    absl::StatusOr<int64_t> put = PutWithin(*etcd_, prefix_ + "nodes/" + node_.node_id,
                                            value.SerializeAsString(), lease_, ttl_);
    if (!put.ok()) FailOnEtcd(put.status());
    if (put.ok() && revision != nullptr) *revision = *put;
    return put.ok();
  }

  void SendReport(const v1::AgentMessage& m) {
    v1::EtcdReport report;
    report.set_to(leader_);
    *report.mutable_message() = m;
    absl::StatusOr<int64_t> put =
        PutWithin(*etcd_, absl::StrFormat("%sin/%s/%08d", prefix_, node_.node_id, ++report_seq_),
                  report.SerializeAsString(), lease_, ttl_);
    if (!put.ok()) Fail(absl::UnavailableError(put.status().message()));
  }

  static std::string NodeIdOf(absl::string_view key) {
    return std::string(key.substr(key.rfind('/') + 1));
  }

  void ApplyOwnEvents(const std::vector<WatchEvent>& events) {
    for (const WatchEvent& e : events) {
      if (failed_) return;
      if (!e.deleted) {
        ApplyEvents(e.kv.value);
        continue;
      }
      // Gone with the coordinator's lease: every batch before it was applied.
      own_gone_at_ = e.kv.mod_revision;
      if (lost_leader_at_ != 0 && own_gone_at_ >= lost_leader_at_) ElectAfterLoss();
    }
  }

  void ApplyRequests(const std::vector<WatchEvent>& events) {
    for (const WatchEvent& e : events) {
      absl::string_view rel = absl::string_view(e.kv.key).substr(prefix_.size());
      if (!failed_ && !e.deleted) ApplyRequest(std::string(rel.substr(9)), e.kv);
    }
  }

  // A batch of the current coordinator's events: those for this node, once (a node follows
  // a coordinator only after its key is ready for it, so none of its batches comes early).
  void ApplyEvents(const std::string& value) {
    v1::EtcdEvents batch;
    if (!batch.ParseFromString(value) || batch.coordinator() != leader_) return;
    if (batch.seq() != 0 && batch.seq() <= leader_seq_) return;
    leader_seq_ = batch.seq();
    successor_ = {.node_id = batch.successor(), .create_revision = batch.successor_revision()};
    for (const v1::EtcdEvents::Addressed& a : batch.events()) {
      if (a.node_id() == node_.node_id) Deliver(a.message());
    }
  }

  // `muster drain` (for the coordinator) or `muster stacks` (for every agent): the answer
  // goes under answers/ID/NODE_ID with the request's lease (etcd_requests.h).
  void ApplyRequest(const std::string& id, const KeyValue& kv) {
    v1::EtcdRequest request;
    if (!request.ParseFromString(kv.value)) return;
    const std::string key = absl::StrCat(prefix_, "answers/", id, "/", node_.node_id);
    if (request.has_drain() && coordinator_) {
      return PutAnswer(key, coordinator_->AnswerDrain(request.drain(), absl::Now()), kv.lease);
    }
    if (!request.has_stacks() || !options_.on_stacks_request) return;
    auto reply = [route = reply_route_, key, lease = kv.lease,
                  host = node_.host](std::vector<RankStack> ranks) {
      v1::EtcdAnswer answer;
      answer.set_host(host);
      for (const RankStack& r : ranks) wire::ToProto(r, answer.add_ranks());
      MutexLock lock(&route->mu);
      if (Impl* impl = route->impl) {
        impl->Enqueue([impl, key, answer, lease] { impl->PutAnswer(key, answer, lease); });
      }
    };
    Post(
        [handler = options_.on_stacks_request, reply,
         timeout = absl::Milliseconds(request.stacks().timeout_ms())] { handler(timeout, reply); });
  }

  // One answer; the command that asked waits for it only so long: a failure is logged.
  void PutAnswer(const std::string& key, const v1::EtcdAnswer& answer, int64_t lease) {
    absl::StatusOr<int64_t> put =
        PutWithin(*etcd_, key, answer.SerializeAsString(), lease, absl::Seconds(2));
    if (!put.ok()) {
      spdlog::warn("etcd rendezvous: cannot answer a request at {}: {}", key,
                   std::string(put.status().message()));
    }
  }

  void Deliver(const v1::ServerMessage& m) {
    if (m.has_error()) {
      return Fail(absl::Status(wire::ToAbslCode(m.error().code()), m.error().message()));
    }
    Event event;
    if (!FromProto(m, node_.node_id, &event)) return;
    if (event.kind == Event::Kind::kRoundStarted) {
      in_round_ = true;
      stop_delivered_ = false;
    } else if (event.kind == Event::Kind::kStopWorkers) {
      stop_delivered_ = true;
    } else if (event.kind == Event::Kind::kFinished) {
      finished_ = true;
    }
    Post([sink = events_, event] { sink(event); });
  }

  // The coordinator is the node with the oldest key (lowest create revision). `since`: a
  // revision no report to a new coordinator precedes (this node's put, or the deletion of
  // the previous coordinator's key). O(1) in etcd with a successor named (election.h).
  void Elect(int64_t since) {
    absl::StatusOr<Elected> found =
        FindNextCoordinator(*etcd_, prefix_, successor_, leader_, garbage_);
    if (!found.ok()) return FailOnEtcd(found.status());
    leader_key_ = std::move(found->node_key);
    if (found->node_id.empty()) {
      return Fail(RendezvousError{
          .status = absl::UnavailableError("this agent's etcd lease ended: dropped from the job"),
          .kill_by = absl::Now()});
    }
    ElectCoordinator(found->node_id, since);
    WatchLeader(found->revision);
  }

  // Watches the coordinator's node key for its deletion from `revision` + 1 (the read that
  // named it): a node watches this one key, not the others (O(1) per node and change). The
  // coordinator sees its own key in its watch of nodes/.
  void WatchLeader(int64_t revision) {
    if (failed_ || leader_ == watched_leader_) return;
    watches_.Remove(leader_watch_);
    leader_watch_ = -1;
    watched_leader_ = leader_;
    if (leader_ == node_.node_id) return;
    leader_watch_ = AddWatch(prefix_ + "nodes/" + leader_, revision + 1,
                             {.prefix = false, .deletes_only = true},
                             [this](const std::vector<WatchEvent>& events) {
                               for (const WatchEvent& e : events) {
                                 if (!e.deleted || NodeIdOf(e.kv.key) != leader_) continue;
                                 LeaderLost(e.kv.mod_revision);
                                 return;
                               }
                             });
  }

  // The coordinator's key went at revision `deleted_at`. Its last batch for this node comes
  // first, then the election (after which the next coordinator's batches alone count):
  // this node's events key and the coordinator's node key are watched by two threads
  // (watch_threads.h), so a batch put before the key went can reach the brain after its
  // deletion, e.g. the job's success with the coordinator leaving at once; a follower that
  // then elected would take that departure for a loss and gather a round alone. When this
  // node has a batch of the coordinator, its events key is on the coordinator's lease and
  // goes at `deleted_at` too: its own watch delivers that deletion after every batch before
  // it, at no cost in etcd (ApplyOwnEvents). Otherwise (no batch yet: a rare waiting node),
  // or when that deletion has not come within a lease TTL, one read of the key as of the
  // revision before (CatchUpOwnEvents).
  void LeaderLost(int64_t deleted_at) {
    lost_leader_at_ = deleted_at;
    if (leader_seq_ == 0) {
      if (CatchUpOwnEvents(deleted_at)) ElectAfterLoss();
      return;
    }
    if (own_gone_at_ >= deleted_at) return ElectAfterLoss();
    brain_loop_->AddTimer(EventLoop::Now() + ttl_, [this, deleted_at] {
      if (lost_leader_at_ != deleted_at) return;  // elected meanwhile
      if (CatchUpOwnEvents(deleted_at)) ElectAfterLoss();
    });
  }

  // The election after the coordinator's loss, once its batches are applied. After the
  // outcome the agents leave: none to elect.
  void ElectAfterLoss() {
    const int64_t since = std::exchange(lost_leader_at_, 0);
    if (failed_ || finished_) return;
    Elect(since);
  }

  // The lost coordinator's last batch for this node, read as of the revision before
  // `deleted_at` (the batch went with the coordinator's lease); one the watch brings too is
  // applied once (EtcdEvents.seq). False: the read failed (the agent fails, as the
  // election's read).
  bool CatchUpOwnEvents(int64_t deleted_at) {
    absl::StatusOr<RangeResult> own = etcd_->Get(prefix_ + "to/" + node_.node_id, deleted_at - 1);
    if (absl::IsOutOfRange(own.status())) {
      spdlog::warn(
          "etcd rendezvous: the lost coordinator's last events for this node cannot be "
          "read back ({}): electing the next one without them",
          std::string(own.status().message()));
      return true;
    }
    if (!own.ok()) {
      FailOnEtcd(own.status());
      return false;
    }
    const int64_t applied = leader_seq_;
    if (!own->kvs.empty()) ApplyEvents(own->kvs.front().value);
    if (leader_seq_ != applied) {
      spdlog::info(
          "etcd rendezvous: the coordinator's key went before its last batch ({}) came: applied it "
          "first",
          leader_seq_);
    }
    return !failed_;
  }

  void ElectCoordinator(const std::string& next, int64_t since) {
    if (failed_ || next == leader_) return;
    const std::string previous = leader_;
    leader_ = next;
    leader_seq_ = 0;
    spdlog::info("etcd rendezvous: coordinator {}{}", next,
                 next == node_.node_id ? " (this agent)" : "");
    if (finished_) return;  // agents leaving after the outcome: nothing to take over
    FollowLeader();
    if (next == node_.node_id) BecomeCoordinator(since);
    if (previous.empty() || !in_round_) {
      PutSelf();
      return;
    }
    // This node runs a round of the coordinator that is gone: stop it (not counted), then
    // be ready for the next coordinator (Stopped).
    handover_ = true;
    if (stop_delivered_) return;
    stop_delivered_ = true;
    Event stop;
    stop.kind = Event::Kind::kStopWorkers;
    stop.node_id = node_.node_id;
    stop.text = absl::StrCat("node lost: the coordinator ", previous, "; ", next, " takes over");
    Post([sink = events_, stop] { sink(stop); });
  }

  void BecomeCoordinator(int64_t since) {
    inbox_ = std::make_unique<CoordinatorInbox>(etcd_.get(), prefix_, node_.node_id, lease_, spec_,
                                                &garbage_);
    coordinator_ = &inbox_->coordinator();
    absl::Status begun = inbox_->Begin(since, absl::Now());
    if (begun.ok()) begun = NameCoordinator(*etcd_, prefix_, node_.node_id, lease_, ttl_);
    if (!begun.ok()) return Fail(absl::UnavailableError(begun.message()));
    AddWatch(inbox_->Watch(), [this](const std::vector<WatchEvent>& events) {
      if (failed_) return;
      if (std::optional<RendezvousError> e = inbox_->Apply(events)) Fail(*e);
    });
  }

  // Holds this agent's liveness connection to the coordinator (none when it is this agent),
  // at the address and with the lease of its node key: one read per coordinator (none
  // when the election read it).
  void FollowLeader() {
    std::optional<KeyValue> known = std::exchange(leader_key_, std::nullopt);
    if (!liveness_) return;
    leader_lease_ = 0;
    std::string address;
    if (leader_ != node_.node_id) {
      absl::StatusOr<RangeResult> key = known && NodeIdOf(known->key) == leader_
                                            ? RangeResult{.kvs = {*std::move(known)}}
                                            : etcd_->Get(prefix_ + "nodes/" + leader_);
      v1::EtcdNode value;
      if (key.ok() && !key->kvs.empty() && value.ParseFromString(key->kvs.front().value)) {
        address = value.liveness();
        leader_lease_ = key->kvs.front().lease;
      } else if (!key.ok()) {
        spdlog::warn(
            "etcd rendezvous: reading the coordinator's key: {} (its death is seen "
            "when its lease ends)",
            std::string(key.status().message()));
      }
    }
    liveness_->Follow(leader_, leader_lease_, address);
  }

  // Without a liveness listener, a dead agent is seen when its lease ends.
  void StartLiveness() {
    absl::StatusOr<std::unique_ptr<Liveness>> started = Liveness::Start(
        node_.address, node_.node_id, lease_, [this](const std::string& id, int64_t lease) {
          Enqueue([this, id, lease] { AgentDied(id, lease); });
        });
    if (started.ok()) liveness_ = *std::move(started);
    if (!started.ok())
      spdlog::warn("etcd rendezvous: no liveness listener: {}", started.status().ToString());
  }

  // A liveness connection ended without a bye: the agent of `id` died, if `lease` is its
  // key's. The Job learns of it before any report its peers send after (their workers'
  // collectives fail next); its lease goes, so every agent sees the key go at once.
  void AgentDied(const std::string& id, int64_t lease) {
    if (failed_ || id == node_.node_id) return;
    // The coordinator checks against the node keys it reads; an agent, the coordinator's.
    const bool known =
        inbox_ ? inbox_->LeaseOf(id) == lease : (id == leader_ && lease == leader_lease_);
    if (!known) return;
    spdlog::info("etcd rendezvous: the agent of node {} died: revoking its lease {:x}", id, lease);
    if (coordinator_) coordinator_->NodeGone(id, absl::Now(), "node lost: its agent died");
    absl::Status revoked = etcd_->RevokeLease(lease);  // another agent may have been first
    if (!revoked.ok())
      spdlog::info("etcd rendezvous: revoking lease {:x}: {}", lease, revoked.ToString());
  }

  // ---- the watch threads: each batch becomes a task ----

  int AddWatch(const std::string& key, int64_t from, const EtcdClient::WatchOptions& options,
               std::function<void(const std::vector<WatchEvent>&)> apply) {
    return AddWatch(etcd_->Watch(key, from, options), std::move(apply));
  }
  int AddWatch(std::unique_ptr<EtcdWatch> watch,
               std::function<void(const std::vector<WatchEvent>&)> apply) {
    auto sink = [this, apply = std::move(apply)](const absl::Status& s,
                                                 std::vector<WatchEvent> events) {
      if (!s.ok()) return Enqueue([this, s] { Fail(absl::UnavailableError(s.message())); });
      Enqueue([apply, events = std::move(events)] { apply(events); });
    };
    return watches_.Add(std::move(watch), ttl_, std::move(sink));
  }

  // ---- the way out ----

  void Post(std::function<void()> fn) {
    options_.loop->Post([alive = alive_, fn = std::move(fn)] {
      if (*alive) fn();
    });
  }

  // A user without a role for the prefix, or none where etcd wants one: exit 2; else 138.
  void FailOnEtcd(const absl::Status& error) {
    Fail(IsPermanentEtcdError(error) ? error : absl::UnavailableError(error.message()));
  }

  void Fail(const absl::Status& error) { Fail(RendezvousError{.status = error}); }
  void Fail(const RendezvousError& error) {
    // The brain's thread or the lease keeper's; a lost lease's kill-by time even after.
    if (failed_.exchange(true) && !error.kill_by) return;
    spdlog::error("etcd rendezvous: {}", std::string(error.status.message()));
    Post([sink = errors_, error] { sink(error); });
  }

  void Shutdown() {
    if (std::exchange(shut_down_, true)) return;
    brain_loop_->Quit();
    watches_.Stop();
    if (brain_.joinable()) brain_.join();
    liveness_.reset();  // a bye on each connection: this agent leaves, it did not die
    const bool lease_lost = keeper_ && keeper_->lost();
    keeper_.reset();
    // The agent's keys go now, not a TTL later: its leaving is seen at once. (Not a lease
    // that could not be kept: etcd is out of reach, and the revoke would only wait.)
    if (lease_ != 0 && !lease_lost) {
      // Not fatal: the lease expires by itself one TTL later.
      absl::Status revoked = etcd_->RevokeLease(lease_);
      if (!revoked.ok())
        spdlog::warn("etcd rendezvous: revoking the lease: {}", revoked.ToString());
    }
  }

  const Options options_;
  // Where a stacks reply goes (from the collector's thread): this Impl while it lives.
  struct ReplyRoute {
    Mutex mu;
    Impl* impl ABSL_GUARDED_BY(mu) = nullptr;
  };
  const std::shared_ptr<ReplyRoute> reply_route_ = std::make_shared<ReplyRoute>();
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // read on the loop thread
  std::unique_ptr<EtcdClient> etcd_;
  NodeInfo node_;
  JobSpec spec_;
  EventSink events_;
  ErrorSink errors_;
  std::string prefix_;  // PREFIX/RUN_ID/
  absl::Duration ttl_;
  int64_t lease_ = 0;

  bool shut_down_ = false;  // the agent loop thread's

  // The brain thread's own.
  std::string leader_;          // the coordinator's node id; "" until known
  int64_t leader_lease_ = 0;    // the coordinator's lease, as its node key said (liveness)
  int64_t leader_seq_ = 0;      // its last batch delivered (EtcdEvents.seq)
  std::string watched_leader_;  // whose node key leader_watch_ watches
  int leader_watch_ = -1;
  std::unique_ptr<CoordinatorInbox> inbox_;  // set while this agent coordinates
  Coordinator* coordinator_ = nullptr;       // inbox_'s
  bool in_round_ = false;                    // workers of a round run (RoundStarted .. Stopped)
  bool stop_delivered_ = false;              // the agent was told to stop this round's workers
  bool handover_ = false;                    // after stopping, be ready for the new coordinator
  bool finished_ = false;
  int64_t own_gone_at_ = 0;          // this node's events key last deleted (by the watch)
  int64_t lost_leader_at_ = 0;       // the coordinator's key deleted, its election pending
  std::atomic<bool> failed_{false};  // also set by the lease keeper's threads
  int report_seq_ = 0;
  Successor successor_;  // as the last batch applied named it
  // leader_'s node key when its election read it (FollowLeader takes it).
  std::optional<KeyValue> leader_key_;
  GarbageLog garbage_;  // keys under the job's prefix passed over, each named once

  const std::unique_ptr<EventLoop> brain_loop_;  // posted tasks, the join's retries
  std::thread brain_;
  WatchThreads watches_;
  std::unique_ptr<LeaseKeeper> keeper_;  // from the join on; reset by Shutdown
  std::unique_ptr<Liveness> liveness_;   // from the join on; reset by Shutdown
};

absl::StatusOr<std::unique_ptr<EtcdRendezvousClient>> EtcdRendezvousClient::Create(
    const Options& options) {
  if (options.loop == nullptr) return absl::InvalidArgumentError("etcd rendezvous: no loop");
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd =
      EtcdClient::Create({.endpoints = options.endpoints, .security = options.security});
  if (!etcd.ok()) return etcd.status();
  absl::StatusOr<std::unique_ptr<EventLoop>> brain = EventLoop::Create();
  if (!brain.ok()) return brain.status();
  return std::unique_ptr<EtcdRendezvousClient>(new EtcdRendezvousClient(
      std::make_unique<Impl>(options, *std::move(etcd), *std::move(brain))));
}

EtcdRendezvousClient::EtcdRendezvousClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdRendezvousClient::~EtcdRendezvousClient() = default;

void EtcdRendezvousClient::Start(const NodeInfo& node, const JobSpec& spec, EventSink events,
                                 ErrorSink errors) {
  impl_->Start(node, spec, std::move(events), std::move(errors));
}

void EtcdRendezvousClient::ReportFailure(int round, const Failure& failure) {
  v1::AgentMessage m;
  m.mutable_worker_failed()->set_round(round);
  ToProto(failure, m.mutable_worker_failed()->mutable_failure());
  impl_->Report(std::move(m));
}

void EtcdRendezvousClient::ReportSucceeded(int round) {
  v1::AgentMessage m;
  m.mutable_workers_succeeded()->set_round(round);
  impl_->Report(std::move(m));
}

void EtcdRendezvousClient::ReportWorkersStarted(int round,
                                                const std::vector<StartedWorker>& workers) {
  v1::AgentMessage m;
  ToProto(round, workers, m.mutable_workers_started());
  impl_->Report(std::move(m));
}

void EtcdRendezvousClient::ReportWorkerEnded(int round, const EndedWorker& worker) {
  v1::AgentMessage m;
  ToProto(round, worker, m.mutable_worker_ended());
  impl_->Report(std::move(m));
}

void EtcdRendezvousClient::ReportStopped(int round, int store_port) {
  impl_->Stopped(round, store_port);
}

void EtcdRendezvousClient::ReportStalled(int round, const Stall& stall) {
  v1::AgentMessage m;
  wire::ToProto(round, stall, m.mutable_stalled());
  impl_->Report(std::move(m));
}

void EtcdRendezvousClient::ReportSample(int round, const StragglerSample& sample) {
  v1::AgentMessage m;
  wire::ToProto(round, sample, m.mutable_straggler_sample());
  impl_->Report(std::move(m));
}

void EtcdRendezvousClient::ReportHealth(const std::string& excluded) { impl_->Health(excluded); }

void EtcdRendezvousClient::Preempt(const std::string& reason) {
  v1::AgentMessage m;
  m.mutable_preempt()->set_reason(reason);
  impl_->Report(std::move(m));
}

bool EtcdRendezvousClient::UploadTraces(const std::vector<TraceChunk>& chunks) {
  if (chunks.empty()) return false;
  impl_->ReportTraces(chunks);
  return true;
}

void EtcdRendezvousClient::Leave(const std::string& why) { impl_->Leave(why); }

}  // namespace muster::rdzv::etcd
