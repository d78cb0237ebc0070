#include "rendezvous/grpc/drain_client.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/connect.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/wire/status_convert.h"

namespace muster::rdzv {

absl::StatusOr<NodeInfo> DrainNode(const JobStatusQuery& query, const std::string& node_id,
                                   const std::string& host, const std::string& reason) {
  RETURN_IF_ERROR(grpc_internal::CheckDialTarget(query.endpoint));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                   grpc_internal::MakeChannelCredentials(query.tls_ca_file, query.tls_cert_file,
                                                         query.tls_key_file));
  std::unique_ptr<v1::Drain::Stub> stub =
      v1::Drain::NewStub(grpc_internal::MakeChannel(query.endpoint.ToString(), std::move(creds)));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + query.timeout));
  context.set_wait_for_ready(query.wait_for_server);
  grpc_internal::AddBearerToken(query.token, &context);
  v1::DrainRequest request;
  request.set_run_id(query.run_id);
  request.set_node_id(node_id);
  request.set_host(host);
  request.set_reason(reason);
  v1::DrainReply reply;
  absl::Status called = wire::ToAbslStatus(stub->Preempt(&context, request, &reply));
  if (absl::IsDeadlineExceeded(called) || absl::IsUnavailable(called)) {
    return absl::Status(
        called.code(),
        absl::StrCat(called.message(), ": ", grpc_internal::ExplainNoAnswer(query.endpoint)));
  }
  RETURN_IF_ERROR(called);
  return NodeInfo{.node_id = reply.node_id(), .host = reply.host()};
}

}  // namespace muster::rdzv
