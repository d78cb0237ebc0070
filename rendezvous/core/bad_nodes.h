// BadNodes: a job's bad-node memory (docs/guides/health-gate.md "Bad-node memory", issue 30
// item 3). Per host, the failed attempts whose root cause the job found there (the failure
// that made it restart: a worker's exit or signal, or the rank a hang verdict named), with
// their reasons; a host where that happened `quarantine_after` times is due for quarantine,
// and the Job (job.cc, Job::QuarantineDue) quarantines it for the rest of the job once the
// next round can form without it. A host, not a node id: a node id names one incarnation
// of an agent (a restarted Pod is a new one), the host name is what comes back. Nothing is
// forgotten within a job; `Replay` rebuilds the counts from a job's restart history, which
// is how the etcd backend's next coordinator continues them.
//
// Pure data, no clock; not thread-safe (the Job's owner serialises calls).
#ifndef MUSTER_RENDEZVOUS_CORE_BAD_NODES_H_
#define MUSTER_RENDEZVOUS_CORE_BAD_NODES_H_

#include <map>
#include <string>
#include <vector>

#include "rendezvous/core/types.h"

namespace muster::rdzv {

class BadNodes {
 public:
  // At most this many reasons are kept per host (the latest; the count goes on).
  static constexpr size_t kMaxReasons = 4;

  // `quarantine_after` < 1: no host is ever due (the memory still counts, for the status).
  explicit BadNodes(int quarantine_after) : quarantine_after_(quarantine_after) {}

  // The round `round` failed with `root_cause` and the job restarts. Counts it on its host
  // when it was the host's doing (FailureKind kWorker or kHung; a lost or preempted node
  // is not a sick one). Returns whether that made the host due.
  bool Record(int round, const Failure& root_cause);
  // Rebuilds the counts from a previous owner's restart history (the records that
  // consumed the budget and name a failure), as if each had been recorded.
  void Replay(const std::vector<RestartRecord>& history);

  // Hosts whose count reached the threshold and that are not quarantined yet, by name.
  std::vector<std::string> Due() const;
  bool quarantined(const std::string& host) const;
  void Quarantine(const std::string& host);
  // How often `host` was a root cause (0 when never).
  int count(const std::string& host) const;
  int quarantine_after() const { return quarantine_after_; }

  // "quarantined: root cause of 2 failed attempts (round 1: rank 3 exit 1: boom; round 2:
  // rank 3 signal 9 (SIGKILL))": why a quarantined host's nodes stay out, for the status.
  std::string Reason(const std::string& host) const;

 private:
  struct Host {
    int count = 0;
    std::vector<std::string> reasons;  // the latest kMaxReasons, oldest first
    bool quarantined = false;
  };
  int quarantine_after_;
  std::map<std::string, Host> hosts_;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_BAD_NODES_H_
