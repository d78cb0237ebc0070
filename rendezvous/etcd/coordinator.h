// Coordinator: the etcd backend's owner of the job (docs/guides/etcd.md). The agent
// whose node key has the lowest create revision runs it: it feeds rendezvous/core's Job,
// through the JobHost the gRPC server's registry uses too (registry/job_host.h), with
// what the agents put in etcd (nodes ready for it, their reports, lost leases) and, as
// the host's transport, publishes the Job's events, batch by batch, to each node's own
// key (to/NODE_ID), which that node alone watches: a round costs O(nodes) in etcd, not
// O(nodes^2). It keeps the Job's round, restart budget and history in etcd so that the
// next coordinator continues them (Job::ContinueFrom), with the previous round's order of
// nodes (stable ranks). For `muster status` it also puts the Job's status (etcd_status.h)
// on each change of phase or round at once, else at most once a second.
//
// Owned by the agent's EtcdRendezvousClient; not thread-safe (its brain thread calls it).
#ifndef MUSTER_RENDEZVOUS_ETCD_COORDINATOR_H_
#define MUSTER_RENDEZVOUS_ETCD_COORDINATOR_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/core/job.h"
#include "rendezvous/etcd/carried_preemptions.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/etcd/job_lease.h"
#include "rendezvous/registry/job_host.h"

namespace muster::v1 {
class AgentMessage;
class DrainRequest;
class EtcdAnswer;
class EtcdJobState;
class Join;
}  // namespace muster::v1

namespace muster::rdzv::etcd {

class Coordinator : private JobHost::Transport {
 public:
  // `job_prefix`: "PREFIX/RUN_ID/"; `lease`: this agent's lease (the events key lives
  // with it).
  Coordinator(EtcdClient* etcd, std::string job_prefix, std::string self_id, int64_t lease,
              const JobSpec& spec);

  // Continues the job from its state in etcd (a first coordinator finds none), with the
  // preemptions it had pending; `present`: the ids of the nodes that have a key now.
  absl::Status Begin(absl::Time now, const std::vector<std::string>& present = {});
  // A node put its key ready for this coordinator (first join, or after stopping the
  // workers of the previous coordinator's round).
  void NodeReady(const v1::Join& join, absl::Time now);
  // A node's key is gone (its lease expired or it left), or its agent died (liveness.h).
  void NodeGone(const std::string& node_id, absl::Time now,
                const std::string& why = "node lost: its etcd lease ended");
  void Report(const std::string& node_id, const v1::AgentMessage& message, absl::Time now);
  // `muster drain` (coordinator_drain.cc): preempts the live node named `node_id`, or else
  // the one on `host`, as JobRegistry::Drain does; the node, or NotFound (no such node),
  // InvalidArgument (several on `host`), FailedPrecondition (no round runs).
  absl::StatusOr<NodeInfo> Drain(const std::string& node_id, const std::string& host,
                                 const std::string& reason, absl::Time now);
  // Drain's answer for the requests/ key's command (etcd_requests.h).
  v1::EtcdAnswer AnswerDrain(const v1::DrainRequest& request, absl::Time now);
  // This agent (the coordinator) leaves; when it was being preempted, its Job removes it
  // now, as a preempted node (coordinator_drain.cc). Otherwise nothing: the next
  // coordinator handles its loss.
  void PreemptedSelfLeaves(const std::string& self_id, absl::Time now);
  // The successor every batch names from now on (election.h): the oldest node key besides
  // this agent's, as its CoordinatorInbox last read them; "" for none.
  void NameSuccessor(const std::string& node_id, int64_t create_revision);
  void Tick(absl::Time now);
  // The Job's next deadline, or the status's next write or the job lease's keep-alive
  // when sooner.
  std::optional<absl::Time> NextDeadline() const;

 private:
  // The host's transport: every change of the Job is published.
  void Deliver(std::vector<Event> events, absl::Time now) override { Publish(now, events); }
  // Puts `events` (and `refusals`: node id, error) as one batch, then the job's state if
  // it changed.
  void Publish(absl::Time now, const std::vector<Event>& events,
               const std::vector<std::pair<std::string, absl::Status>>& refusals = {});
  void PersistState();
  // The previous coordinator's preemptions (carried_): hands the Job one once it is due
  // (coordinator_drain.cc).
  void ContinuePreemption(absl::Time now);
  // Adds the preemptions still pending (this Job's and carried_) to `state`.
  void SavePreemptions(v1::EtcdJobState* state) const;
  // Puts the status now when the phase or round changed or a second has passed since the
  // last write, else schedules it (status_due_).
  void WriteStatus(absl::Time now);
  // Put, retried until it succeeds or a lease TTL has passed.
  absl::Status PutPersistently(const std::string& key, const std::string& value, int64_t lease);
  // PutAll with this agent's lease, retried as PutPersistently.
  absl::Status PutAllPersistently(const std::vector<std::pair<std::string, std::string>>& kvs);

  // Keeps the job's lease alive when due; puts the job and status keys again when it had
  // to be granted anew.
  void KeepJobLease(absl::Time now);

  EtcdClient* etcd_;
  const std::string prefix_;
  const std::string self_;
  const int64_t lease_;
  JobHost host_;
  JobLease job_lease_;
  std::set<std::string> joined_;
  CarriedPreemptions carried_;
  int persisted_round_ = -1;
  int persisted_restarts_ = -1;
  size_t persisted_history_ = 0;
  int64_t published_ = 0;  // batches published (EtcdEvents.seq)
  std::string successor_;  // EtcdEvents.successor, successor_revision
  int64_t successor_revision_ = 0;
  bool persisted_outcome_ = false;
  size_t persisted_preempting_ = 0;
  absl::Time status_written_ = absl::InfinitePast();
  std::optional<absl::Time> status_due_;
  int status_round_ = -1;
  int status_phase_ = -1;
};

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_COORDINATOR_H_
