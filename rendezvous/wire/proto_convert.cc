#include "rendezvous/wire/proto_convert.h"

#include "muster/v1/rendezvous.pb.h"
#include "rendezvous/wire/stacks_convert.h"
#include "rendezvous/wire/traces_convert.h"

namespace muster::rdzv::wire {
namespace {

int64_t Ms(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

int64_t UnixMs(absl::Time t) { return t == absl::InfinitePast() ? 0 : absl::ToUnixMillis(t); }
absl::Time FromUnixMs(int64_t ms) {
  return ms == 0 ? absl::InfinitePast() : absl::FromUnixMillis(ms);
}

void ToProto(const NodeInfo& node, v1::NodeInfo* out) {
  out->set_node_id(node.node_id);
  out->set_host(node.host);
  out->set_address(node.address);
  out->set_rank_hint(node.rank_hint);
  out->set_local_world_size(node.local_world_size);
  out->set_store_port(node.store_port);
  out->set_wants_node_list(node.wants_node_list);
}

NodeInfo FromProto(const v1::NodeInfo& in) {
  NodeInfo node;
  node.node_id = in.node_id();
  node.host = in.host();
  node.address = in.address();
  node.rank_hint = in.rank_hint();
  node.local_world_size = in.local_world_size();
  node.store_port = in.store_port();
  node.wants_node_list = in.wants_node_list();
  return node;
}

void ToProto(const Assignment& a, v1::Assignment* out) {
  out->set_round(a.round);
  out->set_restart_count(a.restart_count);
  out->set_group_rank(a.group_rank);
  out->set_group_world_size(a.group_world_size);
  out->set_rank_base(a.rank_base);
  out->set_world_size(a.world_size);
  out->set_master_addr(a.master_addr);
  out->set_master_port(a.master_port);
  for (const NodeInfo& node : a.nodes) ToProto(node, out->add_nodes());
}

Assignment FromProto(const v1::Assignment& in) {
  Assignment a;
  a.round = in.round();
  a.restart_count = in.restart_count();
  a.group_rank = in.group_rank();
  a.group_world_size = in.group_world_size();
  a.rank_base = in.rank_base();
  a.world_size = in.world_size();
  a.master_addr = in.master_addr();
  a.master_port = in.master_port();
  for (const v1::NodeInfo& node : in.nodes()) a.nodes.push_back(FromProto(node));
  return a;
}

void ToProto(const Outcome& o, v1::Outcome* out) {
  out->set_exit_code(o.exit_code);
  out->set_reason(o.reason);
  if (o.root_cause) wire::ToProto(*o.root_cause, out->mutable_root_cause());
}

Outcome FromProto(const v1::Outcome& in) {
  Outcome o;
  o.exit_code = in.exit_code();
  o.reason = in.reason();
  if (in.has_root_cause()) o.root_cause = wire::FromProto(in.root_cause());
  return o;
}

v1::JobPhase ToProto(JobPhase phase) {
  switch (phase) {
    case JobPhase::kPending:
      return v1::JOB_PHASE_PENDING;
    case JobPhase::kRunning:
      return v1::JOB_PHASE_RUNNING;
    case JobPhase::kRestarting:
      return v1::JOB_PHASE_RESTARTING;
    case JobPhase::kSucceeded:
      return v1::JOB_PHASE_SUCCEEDED;
    case JobPhase::kFailed:
      return v1::JOB_PHASE_FAILED;
    case JobPhase::kPreempting:
      return v1::JOB_PHASE_PREEMPTING;
  }
  return v1::JOB_PHASE_UNSPECIFIED;
}

JobPhase FromProto(v1::JobPhase phase) {
  switch (phase) {
    case v1::JOB_PHASE_RUNNING:
      return JobPhase::kRunning;
    case v1::JOB_PHASE_RESTARTING:
      return JobPhase::kRestarting;
    case v1::JOB_PHASE_SUCCEEDED:
      return JobPhase::kSucceeded;
    case v1::JOB_PHASE_FAILED:
      return JobPhase::kFailed;
    case v1::JOB_PHASE_PREEMPTING:
      return JobPhase::kPreempting;
    default:
      return JobPhase::kPending;
  }
}

v1::WorkerState ToProto(WorkerState state) {
  switch (state) {
    case WorkerState::kPending:
      return v1::WORKER_STATE_PENDING;
    case WorkerState::kRunning:
      return v1::WORKER_STATE_RUNNING;
    case WorkerState::kSucceeded:
      return v1::WORKER_STATE_SUCCEEDED;
    case WorkerState::kFailed:
      return v1::WORKER_STATE_FAILED;
    case WorkerState::kStopped:
      return v1::WORKER_STATE_STOPPED;
  }
  return v1::WORKER_STATE_UNSPECIFIED;
}

WorkerState FromProto(v1::WorkerState state) {
  switch (state) {
    case v1::WORKER_STATE_RUNNING:
      return WorkerState::kRunning;
    case v1::WORKER_STATE_SUCCEEDED:
      return WorkerState::kSucceeded;
    case v1::WORKER_STATE_FAILED:
      return WorkerState::kFailed;
    case v1::WORKER_STATE_STOPPED:
      return WorkerState::kStopped;
    default:
      return WorkerState::kPending;
  }
}

}  // namespace

void ToProto(int round, const std::vector<StartedWorker>& workers, v1::WorkersStarted* out) {
  out->set_round(round);
  for (const StartedWorker& w : workers) {
    v1::StartedWorker* p = out->add_workers();
    p->set_local_rank(w.local_rank);
    p->set_rank(w.rank);
    p->set_pid(w.pid);
    p->set_start(w.start);
    p->set_fallback(w.fallback);
  }
}

std::vector<StartedWorker> FromProto(const v1::WorkersStarted& in) {
  std::vector<StartedWorker> out;
  out.reserve(in.workers_size());
  for (const v1::StartedWorker& p : in.workers()) {
    out.push_back(StartedWorker{.local_rank = p.local_rank(),
                                .rank = p.rank(),
                                .pid = p.pid(),
                                .start = p.start(),
                                .fallback = p.fallback()});
  }
  return out;
}

void ToProto(int round, const EndedWorker& w, v1::WorkerEnded* out) {
  out->set_round(round);
  out->set_local_rank(w.local_rank);
  out->set_pid(w.pid);
  out->set_code(w.code);
  out->set_signal(w.signal);
  out->set_what(w.what);
  out->set_stopped(w.stopped);
}

EndedWorker FromProto(const v1::WorkerEnded& in) {
  return EndedWorker{.local_rank = in.local_rank(),
                     .pid = in.pid(),
                     .code = in.code(),
                     .signal = in.signal(),
                     .what = in.what(),
                     .stopped = in.stopped()};
}

void ToProto(const NodeInfo& node, const JobSpec& spec, v1::Join* out) {
  out->set_run_id(spec.run_id);
  v1::JobSpec* s = out->mutable_spec();
  s->set_min_nodes(spec.min_nodes);
  s->set_max_nodes(spec.max_nodes);
  s->set_max_restarts(spec.max_restarts);
  s->set_spares(spec.spares);
  s->set_restart_after_success(spec.restart_after_success);
  s->set_join_timeout_ms(Ms(spec.join_timeout));
  s->set_last_call_timeout_ms(Ms(spec.last_call_timeout));
  s->set_heartbeat_interval_ms(Ms(spec.heartbeat_interval));
  s->set_heartbeat_misses(spec.heartbeat_misses);
  s->set_stop_timeout_ms(Ms(spec.stop_timeout));
  s->set_quarantine_after(spec.quarantine_after);
  ToProto(node, out->mutable_node());
  out->set_probe(node.probe);
  out->set_command(node.command);
  out->set_log_dir(node.log_dir);
  out->set_containment(node.containment);
  out->set_excluded(node.excluded);
}

void FromProto(const v1::Join& in, NodeInfo* node, JobSpec* spec) {
  *node = FromProto(in.node());
  node->probe = in.probe();
  node->command = in.command();
  node->log_dir = in.log_dir();
  node->containment = in.containment();
  node->excluded = in.excluded();
  const v1::JobSpec& s = in.spec();
  spec->run_id = in.run_id();
  spec->min_nodes = s.min_nodes();
  spec->max_nodes = s.max_nodes();
  spec->max_restarts = s.max_restarts();
  spec->spares = s.spares();
  spec->restart_after_success = s.restart_after_success();
  spec->join_timeout = absl::Milliseconds(s.join_timeout_ms());
  spec->last_call_timeout = absl::Milliseconds(s.last_call_timeout_ms());
  spec->heartbeat_interval = absl::Milliseconds(s.heartbeat_interval_ms());
  spec->heartbeat_misses = s.heartbeat_misses();
  spec->stop_timeout = absl::Milliseconds(s.stop_timeout_ms());
  spec->quarantine_after = s.quarantine_after();
}

void ToProto(const Failure& f, v1::Failure* out) {
  switch (f.kind) {
    case FailureKind::kWorker:
      out->set_kind(v1::FAILURE_KIND_WORKER);
      break;
    case FailureKind::kHung:
      out->set_kind(v1::FAILURE_KIND_HUNG);
      break;
    case FailureKind::kNodeLost:
      out->set_kind(v1::FAILURE_KIND_NODE_LOST);
      break;
    case FailureKind::kPreempted:
      out->set_kind(v1::FAILURE_KIND_PREEMPTED);
      break;
  }
  out->set_node_id(f.node_id);
  out->set_host(f.host);
  out->set_rank(f.rank);
  out->set_local_rank(f.local_rank);
  out->set_pid(f.pid);
  out->set_code(f.code);
  out->set_what(f.what);
  out->set_message(f.message);
  out->set_stderr_tail(f.stderr_tail);
  out->set_restartable(f.restartable);
}

Failure FromProto(const v1::Failure& in) {
  Failure f;
  switch (in.kind()) {
    case v1::FAILURE_KIND_HUNG:
      f.kind = FailureKind::kHung;
      break;
    case v1::FAILURE_KIND_NODE_LOST:
      f.kind = FailureKind::kNodeLost;
      break;
    case v1::FAILURE_KIND_PREEMPTED:
      f.kind = FailureKind::kPreempted;
      break;
    default:  // FAILURE_KIND_WORKER, or a kind a newer peer sent
      f.kind = FailureKind::kWorker;
      break;
  }
  f.node_id = in.node_id();
  f.host = in.host();
  f.rank = in.rank();
  f.local_rank = in.local_rank();
  f.pid = in.pid();
  f.code = in.code();
  f.what = in.what();
  f.message = in.message();
  f.stderr_tail = in.stderr_tail();
  f.restartable = in.restartable();
  return f;
}

void ToProto(const Event& event, v1::ServerMessage* out) {
  switch (event.kind) {
    case Event::Kind::kProgress:
      out->mutable_progress()->set_text(event.text);
      out->mutable_progress()->set_spare(event.spare);
      out->mutable_progress()->set_quarantined(event.quarantined);
      break;
    case Event::Kind::kRoundStarted:
      ToProto(event.assignment, out->mutable_round_started()->mutable_assignment());
      break;
    case Event::Kind::kStopWorkers: {
      v1::StopWorkers* stop = out->mutable_stop_workers();
      stop->set_text(event.text);
      stop->set_counted(event.counted);
      if (event.failure) ToProto(*event.failure, stop->mutable_failure());
      break;
    }
    case Event::Kind::kFinished:
      ToProto(event.outcome, out->mutable_finished()->mutable_outcome());
      break;
    case Event::Kind::kPreempt: {
      v1::PreemptNotice* notice = out->mutable_preempt_notice();
      notice->set_node_id(event.preempted_node);
      notice->set_host(event.preempted_host);
      notice->set_reason(event.text);
      break;
    }
    case Event::Kind::kTraces:
      ToProto(event.traces, out->mutable_traces_stored());
      break;
    case Event::Kind::kStraggler:
      ToProto(event.straggler, out->mutable_straggler());
      break;
  }
}

bool FromProto(const v1::ServerMessage& in, const std::string& node_id, Event* out) {
  *out = Event{};
  out->node_id = node_id;
  switch (in.kind_case()) {
    case v1::ServerMessage::kProgress:
      out->kind = Event::Kind::kProgress;
      out->text = in.progress().text();
      out->spare = in.progress().spare();
      out->quarantined = in.progress().quarantined();
      return true;
    case v1::ServerMessage::kRoundStarted:
      out->kind = Event::Kind::kRoundStarted;
      out->assignment = FromProto(in.round_started().assignment());
      return true;
    case v1::ServerMessage::kStopWorkers:
      out->kind = Event::Kind::kStopWorkers;
      out->text = in.stop_workers().text();
      out->counted = in.stop_workers().counted();
      if (in.stop_workers().has_failure()) out->failure = FromProto(in.stop_workers().failure());
      return true;
    case v1::ServerMessage::kFinished:
      out->kind = Event::Kind::kFinished;
      out->outcome = FromProto(in.finished().outcome());
      out->text = out->outcome.reason;
      return true;
    case v1::ServerMessage::kPreemptNotice:
      out->kind = Event::Kind::kPreempt;
      out->preempted_node = in.preempt_notice().node_id();
      out->preempted_host = in.preempt_notice().host();
      out->text = in.preempt_notice().reason();
      return true;
    case v1::ServerMessage::kTracesStored:
      out->kind = Event::Kind::kTraces;
      out->traces = FromProto(in.traces_stored());
      return true;
    case v1::ServerMessage::kStraggler:
      out->kind = Event::Kind::kStraggler;
      out->straggler = FromProto(in.straggler());
      out->text = out->straggler.line;
      return true;
    default:
      return false;
  }
}

void ToProto(const JobStatusSnapshot& s, v1::JobStatusReply* out) {
  out->set_run_id(s.run_id);
  out->set_phase(ToProto(s.phase));
  out->set_round(s.round);
  out->set_attempt(s.attempt);
  out->set_round_started_unix_ms(UnixMs(s.round_started));
  out->set_restarts_used(s.restarts_used);
  out->set_max_restarts(s.max_restarts);
  out->set_min_nodes(s.min_nodes);
  out->set_max_nodes(s.max_nodes);
  for (const NodeStatus& n : s.nodes) {
    v1::NodeStatus* p = out->add_nodes();
    p->set_node_id(n.node_id);
    p->set_host(n.host);
    p->set_address(n.address);
    p->set_group_rank(n.group_rank);
    p->set_local_world_size(n.local_world_size);
    p->set_last_heartbeat_unix_ms(UnixMs(n.last_heartbeat));
    p->set_state(NodeStateName(n.state));
    p->set_probe(n.probe);
    p->set_command(n.command);
    p->set_log_dir(n.log_dir);
    p->set_containment(n.containment);
    p->set_excluded(n.excluded);
  }
  for (const NodeInfo& n : s.participants) ToProto(n, out->add_participants());
  for (const RestartRecord& r : s.history) {
    v1::RestartRecord* p = out->add_history();
    p->set_round(r.round);
    p->set_attempt(r.attempt);
    p->set_started_unix_ms(UnixMs(r.started));
    p->set_time_unix_ms(UnixMs(r.time));
    p->set_reason(r.reason);
    p->set_counted(r.counted);
    if (r.failure) ToProto(*r.failure, p->mutable_failure());
  }
  if (s.outcome) ToProto(*s.outcome, out->mutable_outcome());
  for (const Condition& c : s.conditions) {
    v1::Condition* p = out->add_conditions();
    p->set_type(c.type);
    p->set_status(c.status ? "True" : "False");
    p->set_reason(c.reason);
    p->set_message(c.message);
    p->set_last_transition_unix_ms(UnixMs(c.last_transition));
  }
  out->mutable_workers()->Reserve(static_cast<int>(s.workers.size()));
  for (const WorkerStatus& w : s.workers) {
    v1::WorkerStatus* p = out->add_workers();
    p->set_node_id(w.node_id);
    p->set_host(w.host);
    p->set_group_rank(w.group_rank);
    p->set_rank(w.rank);
    p->set_local_rank(w.local_rank);
    p->set_pid(w.pid);
    p->set_state(ToProto(w.state));
    p->set_code(w.code);
    p->set_signal(w.signal);
    p->set_what(w.what);
    p->set_restarts(w.restarts);
    p->set_start(w.start);
    p->set_fallback(w.fallback);
  }
  for (const Preemption& pre : s.preempting) {
    v1::PreemptingNode* p = out->add_preempting();
    p->set_node_id(pre.node_id);
    p->set_host(pre.host);
    p->set_reason(pre.reason);
    p->set_since_unix_ms(UnixMs(pre.since));
  }
  for (const TraceRound& r : s.traces) ToProto(r, out->add_traces());
  if (s.straggler) ToProto(*s.straggler, out->mutable_straggler());
}

JobStatusSnapshot FromProto(const v1::JobStatusReply& in) {
  JobStatusSnapshot s;
  s.run_id = in.run_id();
  s.phase = FromProto(in.phase());
  s.round = in.round();
  s.attempt = in.attempt();
  s.round_started = FromUnixMs(in.round_started_unix_ms());
  s.restarts_used = in.restarts_used();
  s.max_restarts = in.max_restarts();
  s.min_nodes = in.min_nodes();
  s.max_nodes = in.max_nodes();
  for (const v1::PreemptingNode& p : in.preempting()) {
    s.preempting.push_back(Preemption{.node_id = p.node_id(),
                                      .host = p.host(),
                                      .reason = p.reason(),
                                      .since = FromUnixMs(p.since_unix_ms())});
  }
  for (const v1::TraceRound& r : in.traces()) s.traces.push_back(FromProto(r));
  if (in.has_straggler()) s.straggler = FromProto(in.straggler());
  for (const v1::NodeStatus& p : in.nodes()) {
    NodeStatus n;
    n.node_id = p.node_id();
    n.host = p.host();
    n.address = p.address();
    n.group_rank = p.group_rank();
    n.local_world_size = p.local_world_size();
    n.last_heartbeat = FromUnixMs(p.last_heartbeat_unix_ms());
    // The service carries the name; a name this client does not know (a newer server)
    // shows as waiting.
    n.state = ParseNodeState(p.state()).value_or(NodeState::kWaiting);
    n.probe = p.probe();
    n.command = p.command();
    n.log_dir = p.log_dir();
    n.containment = p.containment();
    n.excluded = p.excluded();
    s.nodes.push_back(std::move(n));
  }
  for (const v1::NodeInfo& p : in.participants()) s.participants.push_back(FromProto(p));
  for (const v1::RestartRecord& p : in.history()) {
    RestartRecord r;
    r.round = p.round();
    r.attempt = p.attempt();
    r.started = FromUnixMs(p.started_unix_ms());
    r.time = FromUnixMs(p.time_unix_ms());
    r.reason = p.reason();
    r.counted = p.counted();
    if (p.has_failure()) r.failure = FromProto(p.failure());
    s.history.push_back(std::move(r));
  }
  if (in.has_outcome()) s.outcome = FromProto(in.outcome());
  for (const v1::Condition& p : in.conditions()) {
    s.conditions.push_back(Condition{.type = p.type(),
                                     .status = p.status() == "True",
                                     .reason = p.reason(),
                                     .message = p.message(),
                                     .last_transition = FromUnixMs(p.last_transition_unix_ms())});
  }
  s.workers.reserve(in.workers_size());
  for (const v1::WorkerStatus& p : in.workers()) {
    WorkerStatus& w = s.workers.emplace_back();
    w.node_id = p.node_id();
    w.host = p.host();
    w.group_rank = p.group_rank();
    w.rank = p.rank();
    w.local_rank = p.local_rank();
    w.pid = p.pid();
    w.state = FromProto(p.state());
    w.code = p.code();
    w.signal = p.signal();
    w.what = p.what();
    w.restarts = p.restarts();
    w.start = p.start();
    w.fallback = p.fallback();
  }
  return s;
}

void ToProto(const JobSummary& s, v1::JobSummary* out) {
  out->set_run_id(s.run_id);
  out->set_phase(ToProto(s.phase));
  out->set_round(s.round);
  out->set_restarts_used(s.restarts_used);
  out->set_max_restarts(s.max_restarts);
  out->set_nodes(s.nodes);
  out->set_min_nodes(s.min_nodes);
  out->set_max_nodes(s.max_nodes);
  if (s.outcome) ToProto(*s.outcome, out->mutable_outcome());
}

JobSummary FromProto(const v1::JobSummary& in) {
  JobSummary s;
  s.run_id = in.run_id();
  s.phase = FromProto(in.phase());
  s.round = in.round();
  s.restarts_used = in.restarts_used();
  s.max_restarts = in.max_restarts();
  s.nodes = in.nodes();
  s.min_nodes = in.min_nodes();
  s.max_nodes = in.max_nodes();
  if (in.has_outcome()) s.outcome = FromProto(in.outcome());
  return s;
}

}  // namespace muster::rdzv::wire
