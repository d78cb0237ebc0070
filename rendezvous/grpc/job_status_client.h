// GetJobStatus: one muster.v1.JobStatus.Get call (for `muster status` and tests). Blocks
// the calling thread up to `timeout`; gRPC types stay behind this header.
#ifndef MUSTER_RENDEZVOUS_GRPC_JOB_STATUS_CLIENT_H_
#define MUSTER_RENDEZVOUS_GRPC_JOB_STATUS_CLIENT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/endpoint.h"
#include "rendezvous/core/job_status.h"

namespace muster::rdzv {

struct JobStatusQuery {
  Endpoint endpoint;  // the rendezvous server, parsed once (base/endpoint.h)
  std::string run_id;
  std::string token;
  std::string tls_ca_file;  // PEM; set: TLS
  std::string tls_cert_file;
  std::string tls_key_file;
  absl::Duration timeout = absl::Seconds(10);  // the call's deadline
  // false: a refused connection (nothing listens there) fails the call at once; true: the
  // call waits up to `timeout` for a server that is still starting.
  bool wait_for_server = false;
};

// NotFound for an unknown run id, Unauthenticated for a bad token, DeadlineExceeded or
// Unavailable when the server cannot be reached in time.
absl::StatusOr<JobStatusSnapshot> GetJobStatus(const JobStatusQuery& query);

// JobStatus.List: every job the server knows, by run id (query.run_id is not used).
// Errors as GetJobStatus.
absl::StatusOr<std::vector<JobSummary>> ListJobs(const JobStatusQuery& query);

// JobStatus.Watch: calls `on_update` with the current status, then on every change, until
// the job has finished (OK) or the stream breaks (its error). Blocks the calling thread.
absl::Status WatchJobStatus(const JobStatusQuery& query,
                            const std::function<void(const JobStatusSnapshot&)>& on_update);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_GRPC_JOB_STATUS_CLIENT_H_
