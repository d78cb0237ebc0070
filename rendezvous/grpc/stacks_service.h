// StacksService: muster.v1.Stacks (issue 17 item 1, docs/guides/hangs-and-stacks.md "Stacks"). Get
// asks every live agent of the job for its workers' stacks over its Session stream and answers with
// what came back within the call's timeout; a node that did not answer is marked so. Each call
// waits on a thread of its own (never inside a gRPC reaction); calls are rare and human.
//
// Internal to rendezvous/grpc. Ownership: the RendezvousServer owns the service and
// registers it; `registry` and `broker` must outlive it. The destructor joins the calls'
// threads (each ends by its deadline). Thread-safe.
#ifndef MUSTER_RENDEZVOUS_GRPC_STACKS_SERVICE_H_
#define MUSTER_RENDEZVOUS_GRPC_STACKS_SERVICE_H_

#include <memory>
#include <string>

#include "rendezvous/registry/job_registry.h"
#include "rendezvous/registry/stacks_broker.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace muster::rdzv::grpc_internal {

// `token` empty: no token is required.
std::unique_ptr<grpc::Service> NewStacksService(JobRegistry* registry, StacksBroker* broker,
                                                std::string token);

}  // namespace muster::rdzv::grpc_internal

#endif  // MUSTER_RENDEZVOUS_GRPC_STACKS_SERVICE_H_
