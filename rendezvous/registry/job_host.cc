#include "rendezvous/registry/job_host.h"

#include <algorithm>
#include <utility>

#include "base/status_macros.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv {

JobHost::JobHost(const JobSpec& spec, absl::Time now, Transport* transport, LogNames names)
    : job_(spec, now), transport_(transport), names_(std::move(names)) {}

void JobHost::ContinueFrom(int round, int restarts_used, std::vector<RestartRecord> history,
                           const std::vector<std::string>& previous_order) {
  job_.ContinueFrom(round, restarts_used, std::move(history), previous_order);
}

std::string JobHost::OfJob() const {
  return names_.name_job ? " of job " + job_.spec().run_id : "";
}

template <typename Call>
void JobHost::Apply(absl::Time now, const Call& call) {
  const int round_before = job_.round();
  const bool held_before = job_.held_failure().has_value();
  std::vector<Event> events;
  call(&events);
  if (job_.round() != round_before) transport_->RoundStarted(job_.round_formed_in());
  if (!held_before && job_.held_failure()) {  // rendezvous/core/settle_window.h
    if (names_.name_job) {
      spdlog::info("{}: job {}: {}", names_.backend, job_.spec().run_id,
                   HoldNotice(*job_.held_failure()));
    } else {
      spdlog::info("{}: {}", names_.backend, HoldNotice(*job_.held_failure()));
    }
  }
  transport_->Deliver(std::move(events), now);
}

absl::Status JobHost::Join(const NodeInfo& node, const JobSpec& spec, absl::Time now) {
  absl::Status joined;
  const int round_before = job_.round();
  std::vector<Event> events;
  joined = job_.Join(node, spec, now, &events);
  if (!joined.ok()) return joined;  // refused before anything changed (Job::Join)
  if (job_.round() != round_before) transport_->RoundStarted(job_.round_formed_in());
  transport_->Deliver(std::move(events), now);
  return absl::OkStatus();
}

void JobHost::Heartbeat(const std::string& node_id, absl::Time now) {
  job_.Heartbeat(node_id, now);
}

void JobHost::NodeLost(const std::string& node_id, const std::string& why, absl::Time now) {
  Apply(now, [&](std::vector<Event>* out) { job_.NodeLost(node_id, why, now, out); });
}

void JobHost::WorkerFailed(const std::string& node_id, int round, const Failure& failure,
                           absl::Time now) {
  Apply(now,
        [&](std::vector<Event>* out) { job_.WorkerFailed(node_id, round, failure, now, out); });
}

void JobHost::WorkersSucceeded(const std::string& node_id, int round, absl::Time now) {
  Apply(now, [&](std::vector<Event>* out) { job_.WorkersSucceeded(node_id, round, now, out); });
}

void JobHost::WorkersStopped(const std::string& node_id, int round, int store_port,
                             absl::Time now) {
  Apply(now, [&](std::vector<Event>* out) {
    job_.WorkersStopped(node_id, round, store_port, now, out);
  });
}

void JobHost::WorkersStarted(const std::string& node_id, int round,
                             const std::vector<StartedWorker>& workers, absl::Time now) {
  Apply(now, [&](std::vector<Event>*) { job_.WorkersStarted(node_id, round, workers, now); });
}

void JobHost::WorkerEnded(const std::string& node_id, int round, const EndedWorker& ended,
                          absl::Time now) {
  Apply(now, [&](std::vector<Event>*) { job_.WorkerEnded(node_id, round, ended, now); });
}

void JobHost::NodeStalled(const std::string& node_id, int round, const Stall& stall,
                          absl::Time now) {
  Apply(now, [&](std::vector<Event>* out) { job_.NodeStalled(node_id, round, stall, now, out); });
}

void JobHost::NodeSampled(const std::string& node_id, int round, const StragglerSample& sample,
                          absl::Time now) {
  Apply(now, [&](std::vector<Event>* out) { job_.NodeSampled(node_id, round, sample, now, out); });
}

void JobHost::NodeHealth(const std::string& node_id, const std::string& excluded, absl::Time now) {
  Apply(now, [&](std::vector<Event>* out) { job_.NodeHealth(node_id, excluded, now, out); });
}

void JobHost::TracesStored(const std::string& node_id, int round, const std::string& location,
                           TraceNode node, const std::string& error, absl::Time now) {
  Apply(now, [&](std::vector<Event>* out) {
    job_.TracesStored(node_id, round, location, std::move(node), error, now, out);
  });
}

void JobHost::Preempt(const std::string& node_id, const std::string& reason, absl::Time now) {
  Apply(now, [&](std::vector<Event>* out) {
    absl::Status st = job_.Preempt(node_id, reason, now, out);
    if (st.ok()) {
      spdlog::info("{}: node {}{} is being preempted: {}", names_.backend, node_id, OfJob(),
                   reason);
    } else {
      spdlog::info("{}: preemption notice of node {} not passed on: {}", names_.backend, node_id,
                   std::string(st.message()));
    }
  });
}

void JobHost::PreemptedNodeLeft(const Preemption& preemption, absl::Time now) {
  Apply(now, [&](std::vector<Event>* out) { job_.PreemptedNodeLeft(preemption, now, out); });
}

absl::StatusOr<NodeInfo> JobHost::Drain(const std::string& node_id, const std::string& host,
                                        const std::string& reason, absl::Time now) {
  ASSIGN_OR_RETURN(NodeInfo drained, job_.NodeToDrain(node_id, host));
  std::vector<Event> events;
  RETURN_IF_ERROR(job_.Preempt(drained.node_id, reason, now, &events));
  spdlog::info("{}: draining node {} ({}){}: {}", names_.backend, drained.node_id, drained.host,
               OfJob(), reason);
  transport_->Deliver(std::move(events), now);
  return drained;
}

void JobHost::Tick(absl::Time now) {
  Apply(now, [&](std::vector<Event>* out) { job_.Tick(now, out); });
}

bool JobHost::TickIfDue(absl::Time now, std::optional<absl::Time>* wake) {
  std::optional<absl::Time> due = job_.NextDeadline();
  const bool ticked = due && *due <= now;
  if (ticked) {
    Tick(now);
    due = job_.NextDeadline();
    if (due) due = std::max(*due, now + kMinTimerSleep);
  }
  *wake = due;
  return ticked;
}

}  // namespace muster::rdzv
