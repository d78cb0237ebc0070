// TraceStore: where the rendezvous server writes the flight recorder dumps its agents send
// after a failed round (docs/guides/collective-traces.md): <root>[/<run id>]/round<N>/<node id>/
// <file>, as each node's chunks arrive. Bounded per node and round (kMaxTraceBytesPerNode,
// kMaxTraceFilesPerNode) and per job (kMaxTraceBytesPerJob); what is refused is noted, never
// fatal. Writes go to the page cache (at most 1 MiB per chunk) on the caller's thread.
//
// Owned by the server's registry (JobRegistry::SetTraceStore). Thread-safe: one mutex.
#ifndef MUSTER_RENDEZVOUS_REGISTRY_TRACE_STORE_H_
#define MUSTER_RENDEZVOUS_REGISTRY_TRACE_STORE_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "rendezvous/core/traces.h"

namespace muster::rdzv {

class TraceStore {
 public:
  static constexpr int64_t kMaxTraceBytesPerJob = 256 << 20;

  // `root`: "<run dir>/traces" for a hosting agent (one job), "<log dir>/traces" for
  // `muster serve` with `per_job` (one folder per run id below it). `host` names the
  // server's machine in locations ("HOST:DIR/").
  TraceStore(std::string root, bool per_job, std::string host);

  // Appends `chunk` (not `done`'s bookkeeping) to its file. A chunk the limits refuse (a
  // name with '/', out of order, over a limit) or that cannot be written is dropped, and
  // the reason goes into the node's note.
  void Write(const std::string& run_id, const std::string& node_id, const TraceChunk& chunk);

  struct Stored {
    std::string location;  // "HOST:<root>[/<run id>]/round<N>/"
    TraceNode node;        // files relative to location; node_id and host left to the job
  };
  // The node's upload of `round` is complete (`agent_note`: what it left out): what is stored.
  Stored Finish(const std::string& run_id, const std::string& node_id, int round,
                const std::string& agent_note);

 private:
  struct Upload {
    std::vector<std::string> files;  // file names, in arrival order
    std::map<std::string, int64_t> sizes;
    int64_t bytes = 0;
    std::vector<std::string> notes;
  };
  using Key = std::tuple<std::string, std::string, int>;  // run id, node id, round

  std::string RoundDir(const std::string& run_id, int round) const;
  // Checks the limits and writes; the refusal's reason otherwise.
  std::string WriteLocked(const std::string& run_id, const std::string& node_id,
                          const TraceChunk& chunk, Upload& up) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string root_;
  const bool per_job_;
  const std::string host_;
  Mutex mu_;
  std::map<Key, Upload> uploads_ ABSL_GUARDED_BY(mu_);  // until Finish
  std::map<std::string, int64_t> job_bytes_ ABSL_GUARDED_BY(mu_);
};

// A name safe as one path component: [A-Za-z0-9._:@+-] kept, anything else '_', never "."
// or "..".
std::string TracePathComponent(const std::string& name);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_REGISTRY_TRACE_STORE_H_
