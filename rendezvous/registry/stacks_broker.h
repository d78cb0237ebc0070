// StacksBroker: matches the agents' answers to `muster stacks` requests (issue 17 item 1).
// The server opens a request for the nodes it asks, each agent's session delivers that
// node's answer, and the caller waits for all of them or its deadline, whichever comes
// first. Transport-free; owned by the server, which must keep it alive while sessions and
// the Stacks service run. Thread-safe.
#ifndef MUSTER_RENDEZVOUS_REGISTRY_STACKS_BROKER_H_
#define MUSTER_RENDEZVOUS_REGISTRY_STACKS_BROKER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "rendezvous/core/stacks.h"

namespace muster::rdzv {

class StacksBroker {
 public:
  // A request expecting one answer from each of `node_ids`; returns its id (never 0).
  int64_t Open(const std::vector<std::string>& node_ids);
  // `node_id`'s answer to request `id`; ignored when the request is closed, the node was not
  // asked, or it answered already.
  void Deliver(const std::string& node_id, int64_t id, std::vector<RankStack> ranks);
  // Blocks until every node asked has answered or `deadline`, then closes the request.
  // Returns the answers by node id (nodes that did not answer are missing).
  std::map<std::string, std::vector<RankStack>> Wait(int64_t id, absl::Time deadline);

 private:
  struct Request {
    std::set<std::string> waiting;
    std::map<std::string, std::vector<RankStack>> answers;
  };
  Mutex mu_;
  CondVar answered_;
  int64_t last_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, Request> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_REGISTRY_STACKS_BROKER_H_
