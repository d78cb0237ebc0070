// StatusCache: the serialized muster.v1.JobStatusReply of each job, for JobStatus.Get.
// A reply for 1024 nodes x 8 workers is ~400 KB and takes milliseconds to build; building
// it per call would make the status service slower the larger the job. The cache rebuilds
// a job's reply only when JobRegistry::StatusVersion changed (anything but heartbeat times)
// or when it is older than `max_age` (so heartbeat times are at most that stale); every
// other call shares the same bytes (a reference-counted grpc::Slice, no copy).
//
// Internal to rendezvous/grpc. Thread-safe: one mutex; a rebuild holds it, so concurrent
// callers wait for that rebuild instead of repeating it.
#ifndef MUSTER_RENDEZVOUS_GRPC_STATUS_CACHE_H_
#define MUSTER_RENDEZVOUS_GRPC_STATUS_CACHE_H_

#include <grpcpp/support/slice.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "rendezvous/registry/job_registry.h"

namespace muster::rdzv::grpc_internal {

class StatusCache {
 public:
  StatusCache(const JobRegistry* registry, absl::Duration max_age)
      : registry_(registry), max_age_(max_age) {}

  // The job's reply, serialized. NotFound for an unknown run id.
  absl::StatusOr<grpc::Slice> Reply(const std::string& run_id, absl::Time now);

  // Rebuilds so far (for tests).
  int64_t builds() const;

 private:
  struct Entry {
    uint64_t version = 0;
    absl::Time built;
    grpc::Slice bytes;
  };

  const JobRegistry* const registry_;
  const absl::Duration max_age_;
  mutable Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);  // by run id
  int64_t builds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace muster::rdzv::grpc_internal

#endif  // MUSTER_RENDEZVOUS_GRPC_STATUS_CACHE_H_
