#include "rendezvous/etcd/coordinator.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "muster/v1/etcd.pb.h"
#include "rendezvous/core/job_status.h"
#include "rendezvous/etcd/etcd_status.h"
#include "rendezvous/wire/proto_convert.h"
#include "rendezvous/wire/stacks_convert.h"
#include "rendezvous/wire/status_convert.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {

using wire::FromProto;
using wire::ToProto;

namespace {

constexpr absl::Duration kStatusEvery = absl::Seconds(1);

int64_t UnixMillis(absl::Time t) { return t == absl::InfinitePast() ? 0 : absl::ToUnixMillis(t); }
absl::Time FromUnixMillis(int64_t ms) {
  return ms == 0 ? absl::InfinitePast() : absl::FromUnixMillis(ms);
}

}  // namespace

Coordinator::Coordinator(EtcdClient* etcd, std::string job_prefix, std::string self_id,
                         int64_t lease, const JobSpec& spec)
    : etcd_(etcd),
      prefix_(std::move(job_prefix)),
      self_(std::move(self_id)),
      lease_(lease),
      host_(spec, absl::Now(), this, {.backend = "etcd rendezvous"}),
      job_lease_(etcd, spec.heartbeat_interval * spec.heartbeat_misses) {}

absl::Status Coordinator::Begin(absl::Time now, const std::vector<std::string>& present) {
  absl::StatusOr<RangeResult> got = etcd_->Get(prefix_ + "job");
  if (!got.ok()) return got.status();
  v1::EtcdJobState state;
  if (!got->kvs.empty() && !state.ParseFromString(got->kvs[0].value)) {
    return absl::DataLossError(absl::StrCat("etcd key ", prefix_, "job is not a job state"));
  }
  // A finished job's state lingers for its lease (its status for `muster status`): a job
  // started again under the same run id is a new one.
  const bool fresh = got->kvs.empty() || state.finished();
  if (state.finished()) state.Clear();
  RETURN_IF_ERROR(job_lease_.Acquire(state.job_lease(), now));
  if (fresh) {
    // The job's first coordinator; its state and status go under the job's lease.
    PersistState();
    return absl::OkStatus();
  }
  std::vector<RestartRecord> history;
  for (const v1::RestartRecord& p : state.history()) {
    RestartRecord r{.round = p.round(),
                    .attempt = p.attempt(),
                    .started = FromUnixMillis(p.started_unix_ms()),
                    .time = FromUnixMillis(p.time_unix_ms()),
                    .reason = p.reason(),
                    .counted = p.counted()};
    if (p.has_failure()) r.failure = FromProto(p.failure());
    history.push_back(std::move(r));
  }
  if (state.round() > 0) {
    // The previous coordinator's round ended with it: a membership change, not counted.
    history.push_back(RestartRecord{.round = state.round(),
                                    .attempt = state.restarts_used(),
                                    .time = now,
                                    .reason = "node lost: the coordinator",
                                    .counted = false});
  }
  spdlog::info(
      "etcd rendezvous: this agent coordinates the job from round {} on ({} restarts used)",
      state.round() + 1, state.restarts_used());
  std::vector<std::string> order(state.participants().begin(), state.participants().end());
  host_.ContinueFrom(state.round(), state.restarts_used(), std::move(history), order);
  carried_.Load(state, present, now);
  PersistState();  // under this coordinator's job lease id (a new one if it had expired)
  ContinuePreemption(now);
  return absl::OkStatus();
}

void Coordinator::NodeReady(const v1::Join& join, absl::Time now) {
  NodeInfo node;
  JobSpec spec;
  FromProto(join, &node, &spec);
  if (!joined_.insert(node.node_id).second) return;
  absl::Status joined = host_.Join(node, spec, now);  // published (Deliver)
  if (!joined.ok()) {
    joined_.erase(node.node_id);
    Publish(now, {}, {{node.node_id, joined}});
    return;
  }
  carried_.NodeJoined(node.node_id);
  ContinuePreemption(now);
}

void Coordinator::NodeGone(const std::string& node_id, absl::Time now, const std::string& why) {
  carried_.NodeGone(node_id);
  if (joined_.erase(node_id) != 0) host_.NodeLost(node_id, why, now);
  ContinuePreemption(now);
}

void Coordinator::Report(const std::string& node_id, const v1::AgentMessage& m, absl::Time now) {
  if (joined_.count(node_id) == 0) return;
  // Each host call publishes its events (Deliver).
  switch (m.kind_case()) {
    case v1::AgentMessage::kWorkerFailed:
      host_.WorkerFailed(node_id, m.worker_failed().round(), FromProto(m.worker_failed().failure()),
                         now);
      break;
    case v1::AgentMessage::kWorkersSucceeded:
      host_.WorkersSucceeded(node_id, m.workers_succeeded().round(), now);
      break;
    case v1::AgentMessage::kWorkersStopped:
      host_.WorkersStopped(node_id, m.workers_stopped().round(), m.workers_stopped().store_port(),
                           now);
      break;
    case v1::AgentMessage::kWorkersStarted:
      host_.WorkersStarted(node_id, m.workers_started().round(), FromProto(m.workers_started()),
                           now);
      break;
    case v1::AgentMessage::kWorkerEnded:
      host_.WorkerEnded(node_id, m.worker_ended().round(), FromProto(m.worker_ended()), now);
      break;
    case v1::AgentMessage::kPreempt:
      host_.Preempt(node_id, m.preempt().reason(), now);
      break;
    case v1::AgentMessage::kStalled:
      host_.NodeStalled(node_id, m.stalled().round(), FromProto(m.stalled()), now);
      break;
    case v1::AgentMessage::kStragglerSample:
      host_.NodeSampled(node_id, m.straggler_sample().round(), FromProto(m.straggler_sample()),
                        now);
      break;
    case v1::AgentMessage::kHealth:
      host_.NodeHealth(node_id, m.health().excluded(), now);
      break;
    case v1::AgentMessage::kTraces:  // no data through etcd: where each file stays (HOST:PATH)
      host_.TracesStored(node_id, m.traces().round(), "",
                         TraceNode{.files = {m.traces().paths().begin(), m.traces().paths().end()},
                                   .note = m.traces().note()},
                         "", now);
      break;
    default:
      return;  // Join and Leave travel as the node key itself
  }
}

void Coordinator::Tick(absl::Time now) {
  KeepJobLease(now);
  host_.Tick(now);  // published (Deliver)
}

std::optional<absl::Time> Coordinator::NextDeadline() const {
  std::optional<absl::Time> due = host_.NextDeadline();
  if (status_due_ && (!due || *status_due_ < *due)) due = status_due_;
  if (!due || job_lease_.due() < *due) due = job_lease_.due();
  return due;
}

void Coordinator::WriteStatus(absl::Time now) {
  const int phase = static_cast<int>(PhaseOf(host_.job()));
  if (phase == status_phase_ && host_.job().round() == status_round_ &&
      now < status_written_ + kStatusEvery) {
    if (!status_due_) status_due_ = status_written_ + kStatusEvery;
    return;
  }
  status_due_.reset();
  status_written_ = now;
  // One try (each member once): the status is for people; a failed write is retried a
  // second later, and the job goes on meanwhile.
  absl::StatusOr<int64_t> put =
      etcd_->Put(prefix_ + "status", EtcdStatusValue(JobStatusOf(host_.job())), job_lease_.id());
  if (!put.ok()) {
    spdlog::warn("etcd rendezvous: cannot write the job's status: {}",
                 std::string(put.status().message()));
    status_due_ = now + kStatusEvery;
    return;
  }
  status_phase_ = phase;
  status_round_ = host_.job().round();
}

void Coordinator::NameSuccessor(const std::string& node_id, int64_t create_revision) {
  successor_ = node_id;
  successor_revision_ = create_revision;
}

void Coordinator::Publish(absl::Time now, const std::vector<Event>& events,
                          const std::vector<std::pair<std::string, absl::Status>>& refusals) {
  // The state first: a coordinator that dies in between leaves a next one that skips a
  // round number, never one that reuses it.
  PersistState();
  if (!events.empty() || !refusals.empty()) {
    // One batch per node, under its own key, which only that node watches.
    std::map<std::string, v1::EtcdEvents> batches;
    auto batch_of = [&](const std::string& node_id) -> v1::EtcdEvents& {
      v1::EtcdEvents& batch = batches[node_id];
      batch.set_coordinator(self_);
      batch.set_seq(published_ + 1);
      batch.set_successor(successor_);
      batch.set_successor_revision(successor_revision_);
      return batch;
    };
    for (const Event& e : events) {
      v1::EtcdEvents::Addressed* a = batch_of(e.node_id).add_events();
      a->set_node_id(e.node_id);
      ToProto(e, a->mutable_message());
    }
    for (const auto& [node_id, status] : refusals) {
      v1::EtcdEvents::Addressed* a = batch_of(node_id).add_events();
      a->set_node_id(node_id);
      a->mutable_message()->mutable_error()->set_code(wire::ToWireCode(status.code()));
      a->mutable_message()->mutable_error()->set_message(std::string(status.message()));
    }
    ++published_;
    std::vector<std::pair<std::string, std::string>> kvs;
    for (const auto& [node_id, batch] : batches)
      kvs.emplace_back(prefix_ + "to/" + node_id, batch.SerializeAsString());
    absl::Status put = PutAllPersistently(kvs);
    if (!put.ok()) {
      spdlog::warn("etcd rendezvous: cannot publish events: {}", std::string(put.message()));
    }
  }
  WriteStatus(now);
}

absl::Status Coordinator::PutPersistently(const std::string& key, const std::string& value,
                                          int64_t lease) {
  // A lost batch would leave agents waiting for ever; past a lease TTL this agent's own
  // lease is gone too (it exits 138 and the next coordinator takes over).
  const JobSpec& spec = host_.job().spec();
  return PutWithin(*etcd_, key, value, lease, spec.heartbeat_interval * spec.heartbeat_misses)
      .status();
}

absl::Status Coordinator::PutAllPersistently(
    const std::vector<std::pair<std::string, std::string>>& kvs) {
  // As PutPersistently; a batch put again reaches its node once (EtcdEvents.seq).
  const JobSpec& spec = host_.job().spec();
  const absl::Time give_up = absl::Now() + spec.heartbeat_interval * spec.heartbeat_misses;
  for (;;) {
    absl::StatusOr<int64_t> put = etcd_->PutAll(kvs, lease_);
    if (put.ok() || absl::Now() >= give_up) return put.status();
    absl::SleepFor(absl::Milliseconds(200));  // a backoff between tries, not polling
  }
}

void Coordinator::KeepJobLease(absl::Time now) {
  absl::StatusOr<bool> renewed = job_lease_.KeepAlive(now);
  if (!renewed.ok()) {
    spdlog::warn("etcd rendezvous: keeping the job's lease alive: {}",
                 std::string(renewed.status().message()));
    return;
  }
  if (!*renewed) return;
  // A new lease: the keys of the old one are gone; put them again at once.
  persisted_round_ = -1;
  status_phase_ = -1;
  PersistState();
  WriteStatus(now);
}

void Coordinator::PersistState() {
  const bool outcome = host_.job().outcome().has_value();
  v1::EtcdJobState state;
  SavePreemptions(&state);
  const size_t preempting = state.preempting_size();
  if (host_.job().round() == persisted_round_ &&
      host_.job().restarts_used() == persisted_restarts_ &&
      host_.job().history().size() == persisted_history_ && outcome == persisted_outcome_ &&
      preempting == persisted_preempting_) {
    return;
  }
  state.set_round(host_.job().round());
  state.set_restarts_used(host_.job().restarts_used());
  for (const RestartRecord& r : host_.job().history()) {
    v1::RestartRecord* p = state.add_history();
    p->set_round(r.round);
    p->set_attempt(r.attempt);
    p->set_started_unix_ms(UnixMillis(r.started));
    p->set_time_unix_ms(UnixMillis(r.time));
    p->set_reason(r.reason);
    p->set_counted(r.counted);
    if (r.failure) ToProto(*r.failure, p->mutable_failure());
  }
  for (const NodeInfo& n : host_.job().participants()) state.add_participants(n.node_id);
  state.set_job_lease(job_lease_.id());
  state.set_finished(outcome);
  absl::Status put = PutPersistently(prefix_ + "job", state.SerializeAsString(), job_lease_.id());
  if (!put.ok()) {
    spdlog::warn("etcd rendezvous: cannot save the job's state: {}", std::string(put.message()));
    return;
  }
  persisted_round_ = host_.job().round();
  persisted_restarts_ = host_.job().restarts_used();
  persisted_history_ = host_.job().history().size();
  persisted_outcome_ = outcome;
  persisted_preempting_ = preempting;
}

}  // namespace muster::rdzv::etcd
