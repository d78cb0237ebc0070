// JobRegistry: the rendezvous server's state, with no transport in it. Holds every job by
// run id (created by the first Join of that id, with that joiner's JobSpec), each driven by
// its JobHost (job_host.h), whose events it routes to the stream of the node they address,
// and runs one timer thread that sleeps until the earliest of the hosts' deadlines and
// then ticks the hosts due (JobHost::TickIfDue). A
// transport (rendezvous/grpc's AgentSession) implements NodeStream for each connection
// and reports what its agent says; the JobStatus service reads Status and StatusVersion.
//
// Owned by the server that serves it; it must outlive every NodeStream that calls it.
// Thread-safe: one mutex serialises every Job call (Job itself is not thread-safe).
// Events are queued on the NodeStreams while the mutex is held, so each node sees them in
// the order the jobs produced them, and flushed after it is released, so no transport
// work happens under the lock.
#ifndef MUSTER_RENDEZVOUS_REGISTRY_JOB_REGISTRY_H_
#define MUSTER_RENDEZVOUS_REGISTRY_JOB_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "rendezvous/core/job.h"
#include "rendezvous/core/job_status.h"
#include "rendezvous/registry/job_host.h"

namespace muster::rdzv {

class TraceStore;  // trace_store.h

// One agent's connection as the registry sees it.
class NodeStream {
 public:
  virtual ~NodeStream() = default;
  // Called with the registry's mutex held: only queue, never block or call back.
  virtual void Enqueue(const Event& event) = 0;
  // Called without the registry's mutex: start sending what was queued. May be called again
  // with nothing new queued; it must then do nothing.
  virtual void Flush() = 0;
  // Called without the registry's mutex: the job dropped this node (it never stopped its
  // workers); tell it `why` and end the stream.
  virtual void Close(const absl::Status& why) = 0;
  // Called without the registry's mutex: ask the agent for its workers' stacks (request
  // `id`, answered within `timeout`). A transport without stacks ignores it.
  virtual void RequestStacks(int64_t /*id*/, absl::Duration /*timeout*/) {}
};

// A live node of a job, for `muster stacks`.
struct StacksTarget {
  std::string node_id;
  std::string host;
  int group_rank = -1;
  std::shared_ptr<NodeStream> stream;
};

// Someone following a job's status (JobStatus.Watch). Poke() is called without the
// registry's mutex after anything changed; it must not block.
class StatusWatcher {
 public:
  virtual ~StatusWatcher() = default;
  virtual void Poke() = 0;
};

// What the server's metrics count as it happens (metrics/server_metrics.h). Called with the
// registry's mutex held: only count, never block or call back.
class RegistryObserver {
 public:
  virtual ~RegistryObserver() = default;
  virtual void OnJoin() = 0;  // a node was admitted into a job
  // A job's round started, `formed_in` after the job's creation, the previous round's stop
  // or a new gathering (Job::round_formed_in).
  virtual void OnRoundStarted(absl::Duration formed_in) = 0;
};

// The server's jobs and nodes, counted by what their status shows (the server's metrics).
struct RegistryCounts {
  std::map<JobPhase, int> jobs_by_phase;
  std::map<NodeState, int> nodes_by_state;
};

class JobRegistry {
 public:
  // `required_run_id` empty: any run id is served; otherwise joins for others are refused.
  // `liveness_interval` x `liveness_misses`: the TCP keepalive the server's sockets carry
  // (RendezvousServer::Options); a job whose agents were told otherwise is warned about.
  // `job_retention`: a job none of whose agents has been connected for this long (it
  // finished, or was abandoned) is forgotten (`muster serve --job-retention`).
  explicit JobRegistry(std::string required_run_id,
                       absl::Duration liveness_interval = absl::Seconds(5), int liveness_misses = 3,
                       absl::Duration job_retention = kJobRetention);
  static constexpr absl::Duration kJobRetention = absl::Minutes(10);
  ~JobRegistry();  // stops the timer thread

  JobRegistry(const JobRegistry&) = delete;
  JobRegistry& operator=(const JobRegistry&) = delete;

  // Admits `node` into the job `spec.run_id` and remembers `stream` as its route. The
  // error (wrong run id, spec mismatch, rank conflict, finished job) is for this node only.
  absl::Status Join(std::shared_ptr<NodeStream> stream, const NodeInfo& node, const JobSpec& spec);
  void Heartbeat(const std::string& node_id);
  void WorkerFailed(const std::string& node_id, int round, const Failure& failure);
  void WorkersSucceeded(const std::string& node_id, int round);
  void WorkersStarted(const std::string& node_id, int round,
                      const std::vector<StartedWorker>& workers);
  void WorkerEnded(const std::string& node_id, int round, const EndedWorker& ended);
  void WorkersStopped(const std::string& node_id, int round, int store_port);
  // Hang detection (rendezvous/core/hang.h): see Job::NodeStalled.
  void NodeStalled(const std::string& node_id, int round, const Stall& stall);
  // Stragglers (rendezvous/core/straggler.h): see Job::NodeSampled.
  void NodeSampled(const std::string& node_id, int round, const StragglerSample& sample);
  // The node's health gate: see Job::NodeHealth.
  void NodeHealth(const std::string& node_id, const std::string& excluded);
  // The node is being preempted (docs/guides/preemption.md): every node of its job hears it.
  void Preempt(const std::string& node_id, const std::string& reason);
  // `muster drain`: preempts the node of job `run_id` whose id is `node_id`, or else whose
  // host is `host` (InvalidArgument when several match). NotFound for an unknown job or
  // node, FailedPrecondition when no round runs. Returns the node drained.
  absl::StatusOr<NodeInfo> Drain(const std::string& run_id, const std::string& node_id,
                                 const std::string& host, const std::string& reason);
  // Flight recorder dumps (docs/guides/collective-traces.md, job_registry_traces.cc): stores a
  // chunk the node sent through the trace store, and once its upload of the round is done
  // tells the job (Job::TracesStored). Without a store the node hears why none are kept.
  void StoreTraces(const std::string& node_id, const TraceChunk& chunk);
  // Before the first Join: where dumps are written (null: nowhere).
  void SetTraceStore(std::shared_ptr<TraceStore> store);
  // The node's stream closed, failed, or it left: dead at once; its route is dropped.
  void NodeLost(const std::string& node_id, const std::string& why);

  // NotFound for a run id no agent has joined. Copies plain data under the lock in O(nodes +
  // workers); converting and serialising happen outside it. `version`, when given, gets
  // the job's StatusVersion at the time of the copy.
  absl::StatusOr<JobStatusSnapshot> Status(const std::string& run_id,
                                           uint64_t* version = nullptr) const;
  // Changes whenever anything in the job's status but heartbeat times changes (unique
  // across jobs, also when a run id's job is started afresh). NotFound as Status. O(log jobs).
  absl::StatusOr<uint64_t> StatusVersion(const std::string& run_id) const;
  // Every job's summary, by run id, in O(jobs + nodes).
  std::vector<JobSummary> Summaries() const;

  void AddWatcher(std::weak_ptr<StatusWatcher> watcher);
  // Before the first Join: who is told of joins and rounds (null: nobody).
  void SetObserver(std::shared_ptr<RegistryObserver> observer);
  // Every job by phase and every node by state, in O(jobs + nodes) under the mutex.
  RegistryCounts Counts() const;

  // The job's nodes with an open stream, by group rank (waiting nodes last). NotFound as
  // Status.
  absl::StatusOr<std::vector<StacksTarget>> StacksTargets(const std::string& run_id) const;

  // Blocks until no stream but `except_node_id`'s is open (every other agent has heard
  // the outcome and hung up), or `deadline`. Returns whether they all left.
  bool WaitForMembersToLeave(const std::string& except_node_id, absl::Time deadline);

 private:
  // One job: its host, and the host's transport, which routes the events to the streams
  // of members_ and counts the job's status versions.
  struct JobEntry : JobHost::Transport {
    JobEntry(JobRegistry* registry, const JobSpec& spec, absl::Time now)
        : registry(registry), host(spec, now, this, {.backend = "rendezvous", .name_job = true}) {}
    // Within a host call, which the registry makes with its mutex held (the analysis cannot
    // follow the call through JobHost).
    ABSL_NO_THREAD_SAFETY_ANALYSIS void Deliver(std::vector<Event> events, absl::Time now) override;
    ABSL_NO_THREAD_SAFETY_ANALYSIS void RoundStarted(absl::Duration formed_in) override;

    JobRegistry* const registry;
    JobHost host;
    uint64_t version = 0;  // see StatusVersion
    int connected = 0;     // its nodes in members_
    // When `connected` last fell to 0 (InfiniteFuture while an agent is connected): the
    // job is forgotten job_retention_ later.
    absl::Time unattended_since = absl::InfiniteFuture();
  };
  struct Member {
    std::string run_id;
    std::shared_ptr<NodeStream> stream;
  };
  using Members = std::map<std::string, Member>;  // by node id
  using Streams = std::vector<std::shared_ptr<NodeStream>>;
  using JobCall = std::function<void(JobHost&, absl::Time)>;

  // Runs `call` on the node's job host (if the node is known), then flushes the streams its
  // events went to and, with `notify`, pokes the status watchers (heartbeats change nothing
  // they show).
  void WithNodeJob(const std::string& node_id, const JobCall& call, bool notify = true);
  // Queues `events` on their streams (mutex held); appends the streams touched.
  void RouteLocked(const std::vector<Event>& events, Streams* touched)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void FlushAll(const Streams& streams);
  // Whether `job`'s next deadline comes before the one the timer thread sleeps until (most
  // messages move no deadline earlier: no wake-up per message).
  bool TimerMustWakeLocked(const Job& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();
  // Pokes every live watcher (call without mu_).
  void NotifyWatchers();
  // Drops member `m` (its job's count too).
  Members::iterator EraseMemberLocked(Members::iterator m, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the jobs unattended for job_retention_ by `now`; the earliest time another
  // one will be, if any.
  std::optional<absl::Time> ForgetUnattendedLocked(absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string required_run_id_;
  const absl::Duration liveness_interval_;
  const int liveness_misses_;
  const absl::Duration job_retention_;
  mutable Mutex mu_;
  CondVar wake_;  // a deadline may have moved, or stopping
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The timer's wake-up; past while it runs.
  absl::Time timer_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::map<std::string, JobEntry> jobs_ ABSL_GUARDED_BY(mu_);  // by run id
  uint64_t versions_ ABSL_GUARDED_BY(mu_) = 0;                 // the last version handed out
  Members members_ ABSL_GUARDED_BY(mu_);                       // live streams
  // The streams the hosts' events of the current call went to, flushed after it.
  Streams touched_ ABSL_GUARDED_BY(mu_);
  std::vector<std::weak_ptr<StatusWatcher>> watchers_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<RegistryObserver> observer_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<TraceStore> trace_store_ ABSL_GUARDED_BY(mu_);
  std::thread timer_;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_REGISTRY_JOB_REGISTRY_H_
