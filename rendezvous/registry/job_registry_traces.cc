// JobRegistry (job_registry.h): flight recorder dumps of a failed round
// (docs/guides/collective-traces.md). The chunks are written outside the registry's mutex (the
// store has its own); the job is told once the node's upload is complete.
#include "rendezvous/registry/job_registry.h"
#include "rendezvous/registry/trace_store.h"

namespace muster::rdzv {

void JobRegistry::SetTraceStore(std::shared_ptr<TraceStore> store) {
  MutexLock lock(&mu_);
  trace_store_ = std::move(store);
}

void JobRegistry::StoreTraces(const std::string& node_id, const TraceChunk& chunk) {
  std::shared_ptr<TraceStore> store;
  std::string run_id;
  {
    MutexLock lock(&mu_);
    auto m = members_.find(node_id);
    if (m == members_.end()) return;  // not joined, or lost
    run_id = m->second.run_id;
    store = trace_store_;
  }
  if (store && !chunk.file.empty()) store->Write(run_id, node_id, chunk);
  if (!chunk.done) return;
  TraceStore::Stored stored;
  std::string error;
  if (store) {
    stored = store->Finish(run_id, node_id, chunk.round, chunk.note);
  } else {
    error = "this rendezvous server keeps no traces (`muster serve` without --log-dir)";
  }
  WithNodeJob(node_id, [&](JobHost& host, absl::Time now) {
    host.TracesStored(node_id, chunk.round, stored.location, std::move(stored.node), error, now);
  });
}

}  // namespace muster::rdzv
