// DrainService: muster.v1.Drain (issue 17 item 4, docs/guides/preemption.md). Preempt tells every
// agent of the job that one node is being preempted, as that node's SIGTERM would; the
// node's agent then lets its workers checkpoint and leaves. Answers at once.
//
// Internal to rendezvous/grpc. Ownership: the RendezvousServer owns the service and
// registers it; `registry` must outlive it. Thread-safe.
#ifndef MUSTER_RENDEZVOUS_GRPC_DRAIN_SERVICE_H_
#define MUSTER_RENDEZVOUS_GRPC_DRAIN_SERVICE_H_

#include <memory>
#include <string>

#include "rendezvous/registry/job_registry.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace muster::rdzv::grpc_internal {

// `token` empty: no token is required.
std::unique_ptr<grpc::Service> NewDrainService(JobRegistry* registry, std::string token);

}  // namespace muster::rdzv::grpc_internal

#endif  // MUSTER_RENDEZVOUS_GRPC_DRAIN_SERVICE_H_
