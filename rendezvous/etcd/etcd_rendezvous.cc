#include "rendezvous/etcd/etcd_rendezvous.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "muster/v1/etcd.pb.h"
#include "rendezvous/etcd/coordinator.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/etcd/etcd_reports.h"
#include "rendezvous/etcd/lease_keeper.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/grpc/stacks_convert.h"
#include "rendezvous/grpc/status_convert.h"
#include "rendezvous/kill_by.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {

using grpc_internal::FromProto;
using grpc_internal::ToProto;

class EtcdRendezvousClient::Impl {
 public:
  Impl(Options options, std::unique_ptr<EtcdClient> etcd)
      : options_(std::move(options)), etcd_(std::move(etcd)) {
    reply_route_->impl = this;
  }
  // Runs on the loop thread (the agent owns the client): posted sinks after it are dropped.
  ~Impl() {
    *alive_ = false;
    {
      std::lock_guard<std::mutex> lock(reply_route_->mu);
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
    auto done = std::make_shared<bool>(false);
    Enqueue([this, done] {
      if (coordinator_ && !failed_) coordinator_->PreemptedSelfLeaves(node_.node_id, absl::Now());
      std::lock_guard<std::mutex> lock(mu_);
      *done = true;
      cv_.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, absl::ToChronoNanoseconds(ttl_), [&] { return *done || stopping_; });
  }

 private:
  // ---- the brain thread: one task at a time, and the coordinator's deadlines ----

  void Enqueue(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    cv_.notify_all();
  }

  void RunBrain() {
    for (;;) {
      std::deque<std::function<void()>> tasks;
      {
        std::unique_lock<std::mutex> lock(mu_);
        std::optional<absl::Time> due = coordinator_ ? coordinator_->NextDeadline() : std::nullopt;
        auto ready = [&] { return stopping_ || !tasks_.empty(); };
        if (due && *due != absl::InfiniteFuture()) {
          cv_.wait_until(lock, absl::ToChronoTime(*due), ready);
        } else {
          cv_.wait(lock, ready);
        }
        if (stopping_) return;
        tasks.swap(tasks_);
      }
      for (auto& task : tasks) task();
      if (coordinator_) {
        std::optional<absl::Time> due = coordinator_->NextDeadline();
        if (due && absl::Now() >= *due) coordinator_->Tick(absl::Now());
      }
    }
  }

  // Waits up to `d` unless the client stops; false when it stops.
  bool Pause(absl::Duration d) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, absl::ToChronoNanoseconds(d), [&] { return stopping_; });
  }

  void Join() {
    const absl::Time deadline = absl::Now() + options_.join_timeout;
    absl::Time granted = absl::Now();
    absl::StatusOr<int64_t> lease = etcd_->GrantLease(ttl_);
    while (!lease.ok()) {
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
      if (!Pause(absl::Seconds(1))) return;
      granted = absl::Now();
      lease = etcd_->GrantLease(ttl_);
    }
    lease_ = *lease;
    keeper_ = std::make_unique<LeaseKeeper>(etcd_.get(), lease_, ttl_, granted,
                                            [this](const absl::Status& lost) { Fail(lost); });
    if (!PutSelf()) return;
    absl::StatusOr<RangeResult> all = etcd_->RangePrefix(prefix_ + "nodes/");
    if (!all.ok()) return Fail(absl::UnavailableError(all.status().message()));
    for (const KeyValue& kv : all->kvs) ApplyNodeKey(kv);
    std::shared_ptr<EtcdWatch> watch = etcd_->WatchPrefix(prefix_, all->revision + 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      watch_ = watch;
    }
    watcher_ = std::thread([this, watch] { RunWatch(*watch); });
    spdlog::info("etcd rendezvous: joined {} through {} (lease {:x}, TTL {})", prefix_,
                 etcd_->current_endpoint(), lease_, absl::FormatDuration(ttl_));
    ElectCoordinator();
  }

  // Puts this agent's node key, ready for leader_ (or for none yet).
  bool PutSelf() {
    v1::EtcdNode value;
    value.set_ready_for(leader_);
    ToProto(node_, spec_, value.mutable_join());
    absl::StatusOr<int64_t> put = PutWithin(*etcd_, prefix_ + "nodes/" + node_.node_id,
                                            value.SerializeAsString(), lease_, ttl_);
    // A user without a role for the prefix, or none where etcd wants one: exit 2.
    if (!put.ok()) {
      Fail(IsPermanentEtcdError(put.status()) ? put.status()
                                              : absl::UnavailableError(put.status().message()));
    }
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

  struct NodeKey {
    int64_t create_revision = 0;
    v1::EtcdNode value;
  };

  // Takes a node key in (from the first range or the watch).
  void ApplyNodeKey(const KeyValue& kv) {
    std::string id = kv.key.substr(prefix_.size() + 6);  // after "nodes/"
    v1::EtcdNode value;
    if (!value.ParseFromString(kv.value)) {
      spdlog::warn("etcd rendezvous: ignoring the malformed key {}", kv.key);
      return;
    }
    NodeKey& n = nodes_[id];
    n.create_revision = kv.create_revision;
    n.value = std::move(value);
    by_age_[kv.create_revision] = id;
    if (coordinator_ && n.value.ready_for() == node_.node_id) {
      coordinator_->NodeReady(n.value.join(), absl::Now());
    }
  }

  // Events in revision order; the coordinator is re-elected after each node key change,
  // so that a batch of the next coordinator in the same response is not taken for stale.
  void ApplyWatch(const std::vector<WatchEvent>& events) {
    for (const WatchEvent& e : events) {
      if (failed_) return;
      absl::string_view rel = absl::string_view(e.kv.key).substr(prefix_.size());
      if (absl::StartsWith(rel, "nodes/")) {
        if (e.deleted) {
          NodeKeyGone(std::string(rel.substr(6)));
        } else {
          ApplyNodeKey(e.kv);
        }
        ElectCoordinator();
      } else if (absl::StartsWith(rel, "in/") && !e.deleted && coordinator_) {
        ApplyReport(rel.substr(3, rel.rfind('/') - 3), e.kv.value);
      } else if (rel == "events" && !e.deleted) {
        ApplyEvents(e.kv.value);
      } else if (absl::StartsWith(rel, "requests/") && !e.deleted) {
        ApplyRequest(std::string(rel.substr(9)), e.kv);
      }
    }
  }

  // A report of `from` (coordinator only): for this coordinator, not an earlier one.
  void ApplyReport(absl::string_view from, const std::string& value) {
    v1::EtcdReport report;
    if (!report.ParseFromString(value) || report.to() != node_.node_id) return;
    coordinator_->Report(std::string(from), report.message(), absl::Now());
  }

  // A batch of the current coordinator's events: those for this node.
  void ApplyEvents(const std::string& value) {
    v1::EtcdEvents batch;
    if (!batch.ParseFromString(value) || batch.coordinator() != leader_) return;
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
      for (const RankStack& r : ranks) grpc_internal::ToProto(r, answer.add_ranks());
      std::lock_guard<std::mutex> lock(route->mu);
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

  void NodeKeyGone(const std::string& id) {
    auto it = nodes_.find(id);
    if (it == nodes_.end()) return;
    by_age_.erase(it->second.create_revision);
    nodes_.erase(it);
    if (id == node_.node_id) {
      return Fail(rdzv::WithKillBy(
          absl::UnavailableError("this agent's etcd lease ended: dropped from the job"),
          absl::Now()));
    }
    if (coordinator_) coordinator_->NodeGone(id, absl::Now());
  }

  void Deliver(const v1::ServerMessage& m) {
    if (m.has_error()) {
      return Fail(absl::Status(grpc_internal::ToAbslCode(m.error().code()), m.error().message()));
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

  // The coordinator is the node with the oldest key (lowest create revision).
  void ElectCoordinator() {
    if (failed_ || by_age_.empty() || by_age_.begin()->second == leader_) return;
    const std::string next = by_age_.begin()->second;
    const std::string previous = leader_;
    leader_ = next;
    spdlog::info("etcd rendezvous: coordinator {}{}", next,
                 next == node_.node_id ? " (this agent)" : "");
    if (finished_) return;  // agents leaving after the outcome: nothing to take over
    if (next == node_.node_id) BecomeCoordinator();
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

  void BecomeCoordinator() {
    coordinator_ =
        std::make_unique<Coordinator>(etcd_.get(), prefix_, node_.node_id, lease_, spec_);
    std::vector<std::string> present;
    for (const auto& [id, n] : nodes_) present.push_back(id);
    absl::Status begun = coordinator_->Begin(absl::Now(), present);
    if (!begun.ok()) return Fail(absl::UnavailableError(begun.message()));
    std::vector<std::pair<int64_t, const v1::Join*>> ready;
    for (const auto& [id, n] : nodes_) {
      if (n.value.ready_for() == node_.node_id)
        ready.emplace_back(n.create_revision, &n.value.join());
    }
    std::sort(ready.begin(), ready.end());
    for (const auto& [revision, join] : ready) coordinator_->NodeReady(*join, absl::Now());
  }

  // ---- the watch and keeper threads ----

  void RunWatch(EtcdWatch& watch) {
    for (;;) {
      std::vector<WatchEvent> events;
      absl::Status s = watch.Next(&events, ttl_);
      if (absl::IsCancelled(s)) return;
      if (!s.ok()) return Enqueue([this, s] { Fail(absl::UnavailableError(s.message())); });
      Enqueue([this, events = std::move(events)] { ApplyWatch(events); });
    }
  }

  // ---- the way out ----

  void Post(std::function<void()> fn) {
    options_.loop->Post([alive = alive_, fn = std::move(fn)] {
      if (*alive) fn();
    });
  }

  void Fail(const absl::Status& error) {
    // The brain's thread or the lease keeper's; a lost lease's kill-by time even after.
    if (failed_.exchange(true) && !rdzv::KillByOf(error)) return;
    spdlog::error("etcd rendezvous: {}", std::string(error.message()));
    Post([sink = errors_, error] { sink(error); });
  }

  void Shutdown() {
    std::shared_ptr<EtcdWatch> watch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      watch = watch_;
      cv_.notify_all();
    }
    if (watch) watch->Cancel();
    for (std::thread* t : {&brain_, &watcher_}) {
      if (t->joinable()) t->join();
    }
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
    std::mutex mu;
    Impl* impl = nullptr;  // guarded by mu
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

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::shared_ptr<EtcdWatch> watch_;         // guarded by mu_

  // The brain thread's own.
  std::map<std::string, NodeKey> nodes_;
  std::map<int64_t, std::string> by_age_;     // create revision -> node id, of nodes_
  std::string leader_;                        // the coordinator's node id; "" until known
  std::unique_ptr<Coordinator> coordinator_;  // set while this agent coordinates
  bool in_round_ = false;                     // workers of a round run (RoundStarted .. Stopped)
  bool stop_delivered_ = false;               // the agent was told to stop this round's workers
  bool handover_ = false;                     // after stopping, be ready for the new coordinator
  bool finished_ = false;
  std::atomic<bool> failed_{false};  // also set by the lease keeper's threads
  int report_seq_ = 0;

  std::thread brain_;
  std::thread watcher_;
  std::unique_ptr<LeaseKeeper> keeper_;  // from the join on; reset by Shutdown
};

absl::StatusOr<std::unique_ptr<EtcdRendezvousClient>> EtcdRendezvousClient::Create(
    const Options& options) {
  if (options.loop == nullptr) return absl::InvalidArgumentError("etcd rendezvous: no loop");
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd =
      EtcdClient::Create({.endpoints = options.endpoints, .security = options.security});
  if (!etcd.ok()) return etcd.status();
  return std::unique_ptr<EtcdRendezvousClient>(
      new EtcdRendezvousClient(std::make_unique<Impl>(options, *std::move(etcd))));
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
  grpc_internal::ToProto(round, stall, m.mutable_stalled());
  impl_->Report(std::move(m));
}

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
