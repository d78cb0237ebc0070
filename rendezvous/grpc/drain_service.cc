#include "rendezvous/grpc/drain_service.h"

#include <grpcpp/support/server_callback.h>

#include "base/tsan.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/wire/status_convert.h"

namespace muster::rdzv::grpc_internal {

using wire::ToGrpcStatus;
namespace {

class DrainService final : public v1::Drain::CallbackService {
 public:
  DrainService(JobRegistry* registry, std::string token)
      : registry_(registry), token_(std::move(token)) {}

  grpc::ServerUnaryReactor* Preempt(grpc::CallbackServerContext* context,
                                    const v1::DrainRequest* request,
                                    v1::DrainReply* reply) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    absl::Status st = CheckBearerToken(*context, token_);
    if (st.ok() && request->node_id().empty() && request->host().empty()) {
      st = absl::InvalidArgumentError("name the node to drain: a node id or a host");
    }
    if (st.ok()) {
      // Short work under the registry's mutex: no thread of our own is needed.
      absl::StatusOr<NodeInfo> node = registry_->Drain(
          request->run_id(), request->node_id(), request->host(),
          request->reason().empty() ? "drained by muster drain" : request->reason());
      if (node.ok()) {
        reply->set_node_id(node->node_id);
        reply->set_host(node->host);
      }
      st = node.status();
    }
    TsanCallOut out(reactor);
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }

 private:
  JobRegistry* const registry_;
  const std::string token_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewDrainService(JobRegistry* registry, std::string token) {
  return std::make_unique<DrainService>(registry, std::move(token));
}

}  // namespace muster::rdzv::grpc_internal
