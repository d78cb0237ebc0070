// CarriedPreemptions: the preemptions that a coordinator of the etcd backend takes over
// from the job's state (EtcdJobState.preempting; docs/guides/preemption.md): nodes of the round
// of a coordinator that was lost (killed, cut off) which had announced their preemption.
// Without them, such a node's leaving was a plain lost node under the next coordinator (a
// fixed-size job waited up to the join timeout for a replacement instead of ending with
// 143). Once every carried node is gone and every other node that had a key when this
// coordinator took over has joined it (or is gone too), the Job decides
// (Job::PreemptedNodeLeft): below --nnodes minimum the job ends with 143.
//
// Owned by the Coordinator; not thread-safe (the coordinator's thread calls it).
#ifndef MUSTER_RENDEZVOUS_ETCD_CARRIED_PREEMPTIONS_H_
#define MUSTER_RENDEZVOUS_ETCD_CARRIED_PREEMPTIONS_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/core/types.h"

namespace muster::v1 {
class EtcdJobState;
}  // namespace muster::v1

namespace muster::rdzv::etcd {

// Adds `p` to `state`; a next coordinator forgets it past `deadline`.
void SavePreemption(const Preemption& p, absl::Time deadline, v1::EtcdJobState* state);

class CarriedPreemptions {
 public:
  // The preemptions of `state` not past their deadline; `present`: the ids of the nodes
  // that have a key now.
  void Load(const v1::EtcdJobState& state, const std::vector<std::string>& present, absl::Time now);
  // Adds those still pending to `state`.
  void SaveTo(v1::EtcdJobState* state) const;
  size_t size() const { return carried_.size(); }

  void NodeJoined(const std::string& node_id) { awaited_.erase(node_id); }
  void NodeGone(const std::string& node_id);
  // Once every carried node is gone and no other node is awaited: the first carried
  // preemption, for Job::PreemptedNodeLeft; the others are done with it. Drops those past
  // their deadline first (their node stays: a node like any other).
  std::optional<Preemption> TakeDue(absl::Time now);

 private:
  struct Carried {
    Preemption preemption;
    absl::Time deadline;
    bool gone = false;  // its key is gone
  };
  std::vector<Carried> carried_;
  std::set<std::string> awaited_;  // the other nodes with a key at the takeover, not joined
};

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_CARRIED_PREEMPTIONS_H_
