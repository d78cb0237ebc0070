#include "rendezvous/grpc/job_status_client.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/connect.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/wire/proto_convert.h"
#include "rendezvous/wire/status_convert.h"

namespace muster::rdzv {

namespace {

absl::StatusOr<std::unique_ptr<v1::JobStatus::Stub>> MakeStub(const JobStatusQuery& query) {
  RETURN_IF_ERROR(grpc_internal::CheckDialTarget(query.endpoint));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                   grpc_internal::MakeChannelCredentials(query.tls_ca_file, query.tls_cert_file,
                                                         query.tls_key_file));
  return v1::JobStatus::NewStub(
      grpc_internal::MakeChannel(query.endpoint.ToString(), std::move(creds)));
}

// A call that got no answer at all says why (TLS mismatch, nothing listening), not only
// "Deadline Exceeded".
absl::Status Explained(const JobStatusQuery& query, absl::Status status) {
  if (!absl::IsDeadlineExceeded(status) && !absl::IsUnavailable(status)) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), ": ",
                                                  grpc_internal::ExplainNoAnswer(query.endpoint)));
}

// A unary call's context: it reaches the server within query.timeout, waiting for the
// server to come up only where the query asks for it.
void PrepareUnary(const JobStatusQuery& query, grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + query.timeout));
  context->set_wait_for_ready(query.wait_for_server);
  grpc_internal::AddBearerToken(query.token, context);
}

}  // namespace

absl::Status WatchJobStatus(const JobStatusQuery& query,
                            const std::function<void(const JobStatusSnapshot&)>& on_update) {
  ASSIGN_OR_RETURN(std::unique_ptr<v1::JobStatus::Stub> stub, MakeStub(query));
  {
    // Reach the server within query.timeout; after that the watch lasts as long as the job.
    grpc::ClientContext probe;
    PrepareUnary(query, &probe);
    v1::GetJobStatusRequest request;
    request.set_run_id(query.run_id);
    v1::JobStatusReply reply;
    RETURN_IF_ERROR(Explained(query, wire::ToAbslStatus(stub->Get(&probe, request, &reply))));
  }
  grpc::ClientContext context;
  grpc_internal::AddBearerToken(query.token, &context);
  v1::GetJobStatusRequest request;
  request.set_run_id(query.run_id);
  std::unique_ptr<grpc::ClientReader<v1::JobStatusReply>> reader = stub->Watch(&context, request);
  v1::JobStatusReply reply;
  while (reader->Read(&reply)) on_update(wire::FromProto(reply));
  return wire::ToAbslStatus(reader->Finish());
}

absl::StatusOr<JobStatusSnapshot> GetJobStatus(const JobStatusQuery& query) {
  ASSIGN_OR_RETURN(std::unique_ptr<v1::JobStatus::Stub> stub, MakeStub(query));
  grpc::ClientContext context;
  PrepareUnary(query, &context);
  v1::GetJobStatusRequest request;
  request.set_run_id(query.run_id);
  v1::JobStatusReply reply;
  RETURN_IF_ERROR(Explained(query, wire::ToAbslStatus(stub->Get(&context, request, &reply))));
  return wire::FromProto(reply);
}

absl::StatusOr<std::vector<JobSummary>> ListJobs(const JobStatusQuery& query) {
  ASSIGN_OR_RETURN(std::unique_ptr<v1::JobStatus::Stub> stub, MakeStub(query));
  grpc::ClientContext context;
  PrepareUnary(query, &context);
  v1::ListJobsReply reply;
  RETURN_IF_ERROR(
      Explained(query, wire::ToAbslStatus(stub->List(&context, v1::ListJobsRequest(), &reply))));
  std::vector<JobSummary> jobs;
  jobs.reserve(reply.jobs_size());
  for (const v1::JobSummary& j : reply.jobs()) jobs.push_back(wire::FromProto(j));
  return jobs;
}

}  // namespace muster::rdzv
