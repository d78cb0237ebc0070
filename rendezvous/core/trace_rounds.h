// TraceRounds: what a Job keeps of the flight recorder dumps the server collected of failed
// rounds (docs/guides/collective-traces.md), the last kMaxRounds rounds by round number: where
// each node's files are and which nodes have reported. The files are the server's
// (rendezvous/registry/trace_store); who is told what is the job's (Job::TracesStored).
#ifndef MUSTER_RENDEZVOUS_CORE_TRACE_ROUNDS_H_
#define MUSTER_RENDEZVOUS_CORE_TRACE_ROUNDS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "rendezvous/core/traces.h"

namespace muster::rdzv {

class TraceRounds {
 public:
  static constexpr size_t kMaxRounds = 16;

  // `node_id` on `host` reported its dumps of `round`: `stored` (files or a note, else
  // nothing is listed) under `location` (the round's first non-empty one is kept). Null
  // when the round is older than those kept or the node has reported it already; else the
  // round's record.
  const TraceRound* Report(int round, const std::string& node_id, const std::string& host,
                           const std::string& location, TraceNode stored);
  // What is stored of `r` so far, as told to the nodes that wait for it (`waiting`).
  static TracesSummary Summarize(const TraceRound& r, const std::vector<std::string>& waiting);

  // By round, the last kMaxRounds.
  const std::vector<TraceRound>& all() const { return rounds_; }

 private:
  std::vector<TraceRound> rounds_;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_TRACE_ROUNDS_H_
