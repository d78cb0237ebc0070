// JobHost: drives one rendezvous/core Job for a backend, the same way for both: the gRPC
// server's JobRegistry (one host per job it serves) and the etcd backend's Coordinator
// (the one job it coordinates). Each call stamps the Job call with `now`, hands the
// events it made to the backend's Transport (the fan-out: to each node's stream, or to
// each node's etcd key), tells the backend when a round started, announces a failure the
// Job holds (settle_window.h) and logs what preemption and drain did; Tick is the Job's
// timer, due at NextDeadline. What is not the Job's stays with the backend: membership
// by connection or key, the backend's own deadlines, persistence.
//
// Owned by its backend; not thread-safe (the backend serialises calls: the registry's
// mutex, the etcd brain thread). The Transport is called within the call that made the
// events, so under that same serialisation.
#ifndef MUSTER_RENDEZVOUS_REGISTRY_JOB_HOST_H_
#define MUSTER_RENDEZVOUS_REGISTRY_JOB_HOST_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/core/job.h"

namespace muster::rdzv {

class JobHost {
 public:
  // How the job's events leave: the one thing a backend must plug in.
  class Transport {
   public:
    virtual ~Transport() = default;
    // After every host call that may have changed the job (all but Heartbeat and a
    // refused Join), made at `now`: its events in the order the Job made them, each for the
    // node Event::node_id names; possibly none.
    virtual void Deliver(std::vector<Event> events, absl::Time now) = 0;
    // A round started, `formed_in` after the job's creation, the previous round's stop or
    // a new gathering (Job::round_formed_in).
    virtual void RoundStarted(absl::Duration formed_in) {}
  };

  // How the host's log lines name the job: `backend` starts each ("rendezvous", "etcd
  // rendezvous"); `name_job`: whether they name the run id too (a server holds many).
  struct LogNames {
    std::string backend;
    bool name_job = false;
  };

  JobHost(const JobSpec& spec, absl::Time now, Transport* transport, LogNames names);

  JobHost(const JobHost&) = delete;
  JobHost& operator=(const JobHost&) = delete;

  const Job& job() const { return job_; }
  // Job::ContinueFrom (the etcd backend's next coordinator), before the first Join.
  void ContinueFrom(int round, int restarts_used, std::vector<RestartRecord> history,
                    const std::vector<std::string>& previous_order);

  // The Job's calls (job.h), each delivered. A refused Join delivers nothing.
  absl::Status Join(const NodeInfo& node, const JobSpec& spec, absl::Time now);
  void Heartbeat(const std::string& node_id, absl::Time now);  // status only: no delivery
  void NodeLost(const std::string& node_id, const std::string& why, absl::Time now);
  void WorkerFailed(const std::string& node_id, int round, const Failure& failure, absl::Time now);
  void WorkersSucceeded(const std::string& node_id, int round, absl::Time now);
  void WorkersStopped(const std::string& node_id, int round, int store_port, absl::Time now);
  void WorkersStarted(const std::string& node_id, int round,
                      const std::vector<StartedWorker>& workers, absl::Time now);
  void WorkerEnded(const std::string& node_id, int round, const EndedWorker& ended, absl::Time now);
  void NodeStalled(const std::string& node_id, int round, const Stall& stall, absl::Time now);
  void NodeSampled(const std::string& node_id, int round, const StragglerSample& sample,
                   absl::Time now);
  void NodeHealth(const std::string& node_id, const std::string& excluded, absl::Time now);
  void TracesStored(const std::string& node_id, int round, const std::string& location,
                    TraceNode node, const std::string& error, absl::Time now);
  // A node's preemption notice (docs/guides/preemption.md): every node hears it; a notice
  // the Job refuses is logged, not passed on.
  void Preempt(const std::string& node_id, const std::string& reason, absl::Time now);
  // A preemption a previous owner of the job knew of ends: the node left (Job::
  // PreemptedNodeLeft).
  void PreemptedNodeLeft(const Preemption& preemption, absl::Time now);
  // `muster drain`: preempts the node named `node_id`, or else the one on `host`; the node,
  // or the Job's refusal (Job::NodeToDrain, Job::Preempt), which delivers nothing.
  absl::StatusOr<NodeInfo> Drain(const std::string& node_id, const std::string& host,
                                 const std::string& reason, absl::Time now);

  // The Job's timer: when it is due (Job::NextDeadline); nullopt for none.
  std::optional<absl::Time> NextDeadline() const { return job_.NextDeadline(); }
  // Job::Tick, delivered.
  void Tick(absl::Time now);
  // For a timer thread that serves many hosts: Tick when due by `now`; whether it ticked,
  // and in `wake` when the timer must look at this host again (nullopt: no deadline; never
  // sooner than kMinTimerSleep after a tick, so that a deadline the tick did not move
  // cannot spin the timer).
  bool TickIfDue(absl::Time now, std::optional<absl::Time>* wake);
  static constexpr absl::Duration kMinTimerSleep = absl::Milliseconds(5);

 private:
  // Runs `call` (a callable taking std::vector<Event>*, the events out) on the Job and
  // delivers what it changed.
  template <typename Call>
  void Apply(absl::Time now, const Call& call);
  // " of job RUN_ID" where the log lines name the job, else "".
  std::string OfJob() const;

  Job job_;
  Transport* const transport_;
  const LogNames names_;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_REGISTRY_JOB_HOST_H_
