// JobStatusService: muster.v1.JobStatus (docs/design.md §4.6) over the server's JobRegistry. Get
// answers with the job's cached serialized reply (StatusCache); Watch streams the job's
// status on every change until its outcome, each snapshot built on one writer thread of
// the service, never inside a gRPC reaction. Every call must carry the server's token.
//
// Internal to rendezvous/grpc. Ownership: the RendezvousServer owns the service and
// registers it; `registry` must outlive it. Thread-safe: gRPC calls it on its threads.
#ifndef MUSTER_RENDEZVOUS_GRPC_JOB_STATUS_SERVICE_H_
#define MUSTER_RENDEZVOUS_GRPC_JOB_STATUS_SERVICE_H_

#include <memory>
#include <string>

#include "rendezvous/registry/job_registry.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace muster::rdzv::grpc_internal {

// `token` empty: no token is required.
std::unique_ptr<grpc::Service> NewJobStatusService(JobRegistry* registry, std::string token);

}  // namespace muster::rdzv::grpc_internal

#endif  // MUSTER_RENDEZVOUS_GRPC_JOB_STATUS_SERVICE_H_
