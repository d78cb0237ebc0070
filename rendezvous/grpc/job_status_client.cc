#include "rendezvous/grpc/job_status_client.h"

#include "base/status_macros.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/connect.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/grpc/status_convert.h"

namespace muster::rdzv {

absl::StatusOr<JobStatusSnapshot> GetJobStatus(const JobStatusQuery& query) {
  RETURN_IF_ERROR(grpc_internal::ParseEndpoint(query.endpoint).status());
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                   grpc_internal::MakeChannelCredentials(query.tls_ca_file, query.tls_cert_file,
                                                         query.tls_key_file));
  std::unique_ptr<v1::JobStatus::Stub> stub =
      v1::JobStatus::NewStub(grpc_internal::MakeChannel(query.endpoint, std::move(creds)));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + query.timeout));
  context.set_wait_for_ready(true);  // a server still starting is waited for, not refused
  grpc_internal::AddBearerToken(query.token, &context);
  v1::GetJobStatusRequest request;
  request.set_run_id(query.run_id);
  v1::JobStatusReply reply;
  RETURN_IF_ERROR(grpc_internal::ToAbslStatus(stub->Get(&context, request, &reply)));
  return grpc_internal::FromProto(reply);
}

}  // namespace muster::rdzv
