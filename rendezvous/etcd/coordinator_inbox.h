// CoordinatorInbox: what the coordinating agent reads from etcd for its Coordinator. Every
// node key (ready for it, changed, gone) and every report addressed to it come through one
// watch of in/ and nodes/ (neighbouring prefixes: one range, so one revision order, e.g. a
// node's preemption notice before its leaving). Only the coordinator reads these: the other
// agents watch their own events key and the coordinator's node key (O(1) each).
//
// Owned by the agent's EtcdRendezvousClient; not thread-safe (its brain thread calls it).
#ifndef MUSTER_RENDEZVOUS_ETCD_COORDINATOR_INBOX_H_
#define MUSTER_RENDEZVOUS_ETCD_COORDINATOR_INBOX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rendezvous/core/job.h"
#include "rendezvous/etcd/coordinator.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/etcd/node_key.h"
#include "rendezvous/rendezvous_error.h"

namespace muster::rdzv::etcd {

class CoordinatorInbox {
 public:
  // `job_prefix`: "PREFIX/RUN_ID/"; `lease`: this agent's. Keys under nodes/ that are no
  // node keys (node_key.h) are passed over and named in `garbage` (not owned).
  CoordinatorInbox(EtcdClient* etcd, std::string job_prefix, std::string self_id, int64_t lease,
                   const JobSpec& spec, GarbageLog* garbage);
  ~CoordinatorInbox();

  // Reads every node key, continues the job (Coordinator::Begin) and joins the nodes ready
  // for this agent, oldest first. `since`: a revision no report to this coordinator
  // precedes; the watch (Watch) replays reports from there.
  absl::Status Begin(int64_t since, absl::Time now);
  // The watch to feed Apply with (after Begin).
  std::unique_ptr<EtcdWatch> Watch() const;
  // A batch of that watch; an error (Unavailable, to be killed by now) when this agent's
  // own node key is gone.
  std::optional<RendezvousError> Apply(const std::vector<WatchEvent>& events);

  Coordinator& coordinator() { return *coordinator_; }
  // The lease of `node_id`'s key as last read; 0 when it has no key.
  int64_t LeaseOf(const std::string& node_id) const;

 private:
  void ApplyNodeKey(const KeyValue& kv);
  // Names the Coordinator's successor (election.h): the oldest key of by_age_ but this
  // agent's. O(1): this agent's key is the oldest or the second.
  void NameSuccessor();

  struct NodeKey {
    int64_t create_revision = 0;
    int64_t lease = 0;
    std::string ready_for;
  };
  EtcdClient* etcd_;
  GarbageLog* garbage_;
  const std::string prefix_;
  const std::string self_;
  std::unique_ptr<Coordinator> coordinator_;
  std::map<std::string, NodeKey> nodes_;
  std::set<std::pair<int64_t, std::string>> by_age_;  // nodes_ by create revision
  int64_t nodes_read_at_ = 0;  // nodes_ holds every change up to this revision
  int64_t since_ = 0;
  bool begun_ = false;  // NodeReady goes to the Coordinator once it has begun
};

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_COORDINATOR_INBOX_H_
