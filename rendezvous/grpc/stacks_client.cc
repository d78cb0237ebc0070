#include "rendezvous/grpc/stacks_client.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/connect.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/wire/stacks_convert.h"
#include "rendezvous/wire/status_convert.h"

namespace muster::rdzv {

absl::StatusOr<std::vector<NodeStacks>> GetStacks(const JobStatusQuery& query,
                                                  absl::Duration collect) {
  RETURN_IF_ERROR(grpc_internal::CheckDialTarget(query.endpoint));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                   grpc_internal::MakeChannelCredentials(query.tls_ca_file, query.tls_cert_file,
                                                         query.tls_key_file));
  std::unique_ptr<v1::Stacks::Stub> stub =
      v1::Stacks::NewStub(grpc_internal::MakeChannel(query.endpoint.ToString(), std::move(creds)));
  grpc::ClientContext context;
  // The server answers within `collect` once reached; reaching it has query.timeout.
  context.set_deadline(absl::ToChronoTime(absl::Now() + query.timeout + collect));
  context.set_wait_for_ready(query.wait_for_server);
  grpc_internal::AddBearerToken(query.token, &context);
  v1::GetStacksRequest request;
  request.set_run_id(query.run_id);
  request.set_timeout_ms(absl::ToInt64Milliseconds(collect));
  v1::StacksReply reply;
  absl::Status called = wire::ToAbslStatus(stub->Get(&context, request, &reply));
  if (absl::IsDeadlineExceeded(called) || absl::IsUnavailable(called)) {
    return absl::Status(
        called.code(),
        absl::StrCat(called.message(), ": ", grpc_internal::ExplainNoAnswer(query.endpoint)));
  }
  RETURN_IF_ERROR(called);
  std::vector<NodeStacks> nodes;
  for (const v1::NodeStacks& n : reply.nodes()) nodes.push_back(wire::FromProto(n));
  return nodes;
}

}  // namespace muster::rdzv
