#include "rendezvous/core/job_status.h"

#include <utility>

namespace muster::rdzv {

const char* JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kPending:
      return "Pending";
    case JobPhase::kRunning:
      return "Running";
    case JobPhase::kRestarting:
      return "Restarting";
    case JobPhase::kSucceeded:
      return "Succeeded";
    case JobPhase::kFailed:
      return "Failed";
    case JobPhase::kPreempting:
      return "Preempting";
  }
  return "Unknown";
}

JobPhase PhaseOf(const Job& job) {
  switch (job.phase()) {
    case Job::Phase::kGathering:
      return job.round() == 0 ? JobPhase::kPending : JobPhase::kRestarting;
    case Job::Phase::kRunning:
      return job.preempting().empty() ? JobPhase::kRunning : JobPhase::kPreempting;
    case Job::Phase::kStopping:
      return JobPhase::kRestarting;
    case Job::Phase::kFinished:
      return job.outcome() && job.outcome()->exit_code == 0 ? JobPhase::kSucceeded
                                                            : JobPhase::kFailed;
  }
  return JobPhase::kPending;
}

JobStatusSnapshot JobStatusOf(const Job& job) {
  JobStatusSnapshot s;
  s.run_id = job.spec().run_id;
  s.phase = PhaseOf(job);
  s.round = job.round();
  s.attempt = job.attempt();
  s.round_started = job.round_started();
  s.restarts_used = job.restarts_used();
  s.max_restarts = job.spec().max_restarts;
  s.min_nodes = job.spec().min_nodes;
  s.max_nodes = job.spec().max_nodes;
  s.participants = job.participants();
  s.history = job.history();
  s.outcome = job.outcome();
  s.conditions = job.conditions();
  s.workers = job.Workers();
  s.preempting = job.preempting();
  s.straggler = job.straggler();
  s.traces = job.traces();
  std::vector<Job::NodeView> views = job.NodeViews();
  s.nodes.reserve(views.size());
  for (Job::NodeView& v : views) {
    s.nodes.push_back(NodeStatus{
        .node_id = std::move(v.info.node_id),
        .host = std::move(v.info.host),
        .address = std::move(v.info.address),
        .group_rank = v.group_rank,
        .local_world_size = v.info.local_world_size,
        .last_heartbeat = v.last_seen,
        .state = v.state,
        .probe = std::move(v.info.probe),
        .command = std::move(v.info.command),
        .log_dir = std::move(v.info.log_dir),
        .containment = std::move(v.info.containment),
        .excluded = std::move(v.info.excluded),
    });
  }
  return s;
}

JobSummary JobSummaryOf(const Job& job) {
  int live = 0;
  for (const Job::NodeView& v : job.NodeViews()) live += v.state != NodeState::kLeft ? 1 : 0;
  return JobSummary{.run_id = job.spec().run_id,
                    .phase = PhaseOf(job),
                    .round = job.round(),
                    .restarts_used = job.restarts_used(),
                    .max_restarts = job.spec().max_restarts,
                    .nodes = live,
                    .min_nodes = job.spec().min_nodes,
                    .max_nodes = job.spec().max_nodes,
                    .outcome = job.outcome()};
}

}  // namespace muster::rdzv
