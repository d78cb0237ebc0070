// JobHarness: drives one rdzv::Job with a fake clock for the core tests (job_test.cc,
// job_workers_test.cc) and collects the events per node. Test-only; not thread-safe.
#ifndef MUSTER_RENDEZVOUS_CORE_JOB_HARNESS_H_
#define MUSTER_RENDEZVOUS_CORE_JOB_HARNESS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rendezvous/core/job.h"

namespace muster::rdzv {

// Drives a Job with a fake clock and collects the events per node.
class JobHarness {
 public:
  explicit JobHarness(JobSpec spec) : spec_(spec), job_(spec, now_) {}

  absl::Status Join(const std::string& id, int hint = -1, int local = 2, int port = 0,
                    std::string excluded = "") {
    NodeInfo n{.node_id = id,
               .host = "host-" + id,
               .address = "10.0.0." + id,
               .rank_hint = hint,
               .local_world_size = local,
               .store_port = port ? port : 1000 + Num(id),
               .wants_node_list = wants_node_list_,
               .probe = "",
               .excluded = std::move(excluded)};
    return job_.Join(n, spec_, now_, &events_);
  }
  void Advance(absl::Duration d) {
    now_ += d;
    job_.Tick(now_, &events_);
  }
  void Fail(const std::string& id, int code, bool restartable, std::string message = "",
            std::string stderr_tail = "") {
    Failure f{.node_id = id,
              .host = "host-" + id,
              .rank = 1,
              .local_rank = 1,
              .pid = 42,
              .code = code,
              .what = "exit " + std::to_string(code),
              .message = std::move(message),
              .stderr_tail = std::move(stderr_tail),
              .restartable = restartable};
    job_.WorkerFailed(id, job_.round(), f, now_, &events_);
  }
  void Health(const std::string& id, const std::string& excluded) {
    job_.NodeHealth(id, excluded, now_, &events_);
  }
  void StopAll(int port_offset = 100) {
    for (const NodeInfo& p : std::vector<NodeInfo>(job_.participants())) {
      job_.WorkersStopped(p.node_id, job_.round(), 1000 + Num(p.node_id) + port_offset, now_,
                          &events_);
    }
  }
  // Events for `id` since the last call, then forgets them.
  std::vector<Event> Take(const std::string& id) {
    std::vector<Event> mine, rest;
    for (Event& e : events_) (e.node_id == id ? mine : rest).push_back(std::move(e));
    events_ = std::move(rest);
    return mine;
  }
  std::optional<Event> Last(const std::string& id, Event::Kind kind) {
    std::optional<Event> found;
    for (Event& e : Take(id)) {
      if (e.kind == kind) found = e;
    }
    return found;
  }
  void set_wants_node_list(bool v) { wants_node_list_ = v; }
  Job& job() { return job_; }
  absl::Time now() const { return now_; }
  const JobSpec& spec() const { return spec_; }

 private:
  static int Num(const std::string& id) { return std::stoi(id); }
  absl::Time now_ = absl::FromUnixSeconds(1000);
  JobSpec spec_;
  Job job_;
  std::vector<Event> events_;
  bool wants_node_list_ = true;
};

inline JobSpec Spec(int min, int max, int restarts = 0) {
  JobSpec s;
  s.run_id = "job";
  s.min_nodes = min;
  s.max_nodes = max;
  s.max_restarts = restarts;
  return s;
}

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_JOB_HARNESS_H_
