#include "rendezvous/grpc/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/tsan.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/agent_session.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/grpc/job_registry.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/grpc/status_cache.h"
#include "rendezvous/grpc/status_convert.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv {
namespace {

using grpc_internal::JobRegistry;

// Ends a stream at once with `status` (a refused token); deletes itself when done.
class RejectedSession : public grpc_internal::SessionReactor {
 public:
  explicit RejectedSession(const absl::Status& status) {
    grpc::Status refusal = grpc_internal::ToGrpcStatus(status);
    TsanCallOut out(this);
    Finish(std::move(refusal));
  }
  void OnDone() override {
    TsanAcquire(this);
    delete this;
  }
};

class RendezvousService final : public v1::Rendezvous::CallbackService {
 public:
  RendezvousService(JobRegistry* registry, std::string token)
      : registry_(registry), token_(std::move(token)) {}

  grpc_internal::SessionReactor* Session(grpc::CallbackServerContext* context) override {
    absl::Status auth = grpc_internal::CheckBearerToken(*context, token_);
    if (!auth.ok()) {
      spdlog::warn("rendezvous: refused a session from {}: {}", context->peer(),
                   std::string(auth.message()));
      return new RejectedSession(auth);
    }
    return grpc_internal::NewAgentSession(registry_, context->peer());
  }

 private:
  JobRegistry* const registry_;
  const std::string token_;
};

// Heartbeat times in a JobStatus.Get reply are at most this old (see StatusCache).
constexpr absl::Duration kStatusMaxAge = absl::Seconds(1);

// Get is a raw method: it answers with the cached serialized reply (same bytes on the wire
// as the typed method, so generated clients in any language read it as a JobStatusReply).
class JobStatusService final
    : public v1::JobStatus::WithRawCallbackMethod_Get<v1::JobStatus::CallbackService> {
 public:
  JobStatusService(JobRegistry* registry, std::string token)
      : registry_(registry), token_(std::move(token)), cache_(registry, kStatusMaxAge) {}

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* request, grpc::ByteBuffer* reply) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    grpc::Status status = grpc_internal::ToGrpcStatus(Answer(*context, *request, reply));
    TsanCallOut out(reactor);  // gRPC's own reactor: it calls nothing of ours back
    reactor->Finish(std::move(status));
    return reactor;
  }

  grpc::ServerWriteReactor<v1::JobStatusReply>* Watch(
      grpc::CallbackServerContext* context, const v1::GetJobStatusRequest* request) override;

 private:
  absl::Status Answer(const grpc::CallbackServerContext& context, const grpc::ByteBuffer& request,
                      grpc::ByteBuffer* reply) {
    RETURN_IF_ERROR(grpc_internal::CheckBearerToken(context, token_));
    std::vector<grpc::Slice> slices;
    if (!request.Dump(&slices).ok()) return absl::InternalError("cannot read the request");
    std::string bytes;
    for (const grpc::Slice& slice : slices) {
      bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    v1::GetJobStatusRequest parsed;
    if (!parsed.ParseFromString(bytes)) {
      return absl::InvalidArgumentError("malformed GetJobStatusRequest");
    }
    ASSIGN_OR_RETURN(grpc::Slice answer, cache_.Reply(parsed.run_id(), absl::Now()));
    *reply = grpc::ByteBuffer(&answer, 1);
    return absl::OkStatus();
  }

  JobRegistry* const registry_;
  const std::string token_;
  grpc_internal::StatusCache cache_;
};

// One JobStatus.Watch stream: writes a snapshot whenever it differs from the last one
// written, one write in flight at a time, and finishes after the job's outcome. Owned by
// itself (self_) until gRPC calls OnDone; the registry only holds a weak reference.
class WatchReactor : public grpc::ServerWriteReactor<v1::JobStatusReply>,
                     public grpc_internal::StatusWatcher,
                     public std::enable_shared_from_this<WatchReactor> {
 public:
  WatchReactor(JobRegistry* registry, std::string run_id)
      : registry_(registry), run_id_(std::move(run_id)) {}

  void Begin(std::shared_ptr<WatchReactor> self) {
    self_ = std::move(self);
    registry_->AddWatcher(std::weak_ptr<grpc_internal::StatusWatcher>(shared_from_this()));
    Poke();
  }

  // A watch the token check refused: ends at once, alive until OnDone.
  void Refuse(std::shared_ptr<WatchReactor> self, grpc::Status status) {
    self_ = std::move(self);
    std::lock_guard<std::mutex> lock(mu_);
    FinishLocked(std::move(status));
  }

  void Poke() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    if (in_flight_) {
      pending_ = true;
      return;
    }
    WriteIfChangedLocked();
  }

  void OnWriteDone(bool ok) override {
    TsanReaction in(this);
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_ = false;
    if (!ok) return FinishLocked(grpc::Status::OK);  // the client went away
    if (pending_) {
      pending_ = false;
      WriteIfChangedLocked();
    } else if (final_) {
      FinishLocked(grpc::Status::OK);
    }
  }

  void OnCancel() override {
    TsanReaction in(this);
    std::lock_guard<std::mutex> lock(mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    TsanAcquire(this);  // not a TsanReaction: `this` may be gone when it returns
    self_.reset();
  }

 private:
  void WriteIfChangedLocked() {
    absl::StatusOr<JobStatusSnapshot> status = registry_->Status(run_id_);
    if (!status.ok()) return FinishLocked(grpc_internal::ToGrpcStatus(status.status()));
    v1::JobStatusReply reply;
    grpc_internal::ToProto(*status, &reply);
    // Heartbeat times change all the time; a "change" is anything else.
    for (auto& node : *reply.mutable_nodes()) node.clear_last_heartbeat_unix_ms();
    std::string bytes = reply.SerializeAsString();
    final_ = status->phase == JobPhase::kSucceeded || status->phase == JobPhase::kFailed;
    if (bytes == last_) {
      if (final_) FinishLocked(grpc::Status::OK);
      return;
    }
    last_ = std::move(bytes);
    reply_ = std::move(reply);
    in_flight_ = true;
    TsanCallOut out(this);
    StartWrite(&reply_);
  }

  void FinishLocked(grpc::Status status) {
    if (done_) return;
    done_ = true;
    TsanCallOut out(this);
    Finish(std::move(status));
  }

  JobRegistry* const registry_;
  const std::string run_id_;
  std::shared_ptr<WatchReactor> self_;
  std::mutex mu_;
  v1::JobStatusReply reply_;  // the write in flight
  std::string last_;
  bool in_flight_ = false, pending_ = false, final_ = false, done_ = false;
};

grpc::ServerWriteReactor<v1::JobStatusReply>* JobStatusService::Watch(
    grpc::CallbackServerContext* context, const v1::GetJobStatusRequest* request) {
  absl::Status auth = grpc_internal::CheckBearerToken(*context, token_);
  auto reactor = std::make_shared<WatchReactor>(registry_, request->run_id());
  WatchReactor* raw = reactor.get();
  if (!auth.ok()) {
    raw->Refuse(std::move(reactor), grpc_internal::ToGrpcStatus(auth));
    return raw;
  }
  raw->Begin(std::move(reactor));
  return raw;
}

}  // namespace

class RendezvousServer::Impl {
 public:
  explicit Impl(const Options& options)
      : registry_(options.run_id),
        rendezvous_(&registry_, options.token),
        job_status_(&registry_, options.token) {}

  ~Impl() { Shutdown(); }

  absl::Status Start(const Options& options) {
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                     grpc_internal::MakeServerCredentials(
                         options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file));
    // Process-wide switch: every server built from now on serves grpc.health.v1.
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    // gRPC sets SO_REUSEPORT by default; two servers sharing a port would split a job.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // Agents ping as often as they heartbeat (client keepalive): accept it instead of
    // answering "too many pings" with GOAWAY.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 100);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddListeningPort(options.listen_address, creds, &port_);
    builder.RegisterService(&rendezvous_);
    builder.RegisterService(&job_status_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      server_.reset();
      return absl::UnavailableError(
          absl::StrCat("rendezvous server cannot listen on ", options.listen_address,
                       " (address in use, or not an address of this host)"));
    }
    spdlog::info("rendezvous server listening on {} (port {}){}{}", options.listen_address, port_,
                 options.token.empty() ? "" : ", token required",
                 options.tls_cert_file.empty() ? "" : ", TLS");
    return absl::OkStatus();
  }

  int port() const { return port_; }

  bool WaitForAgentsToLeave(const std::string& except, absl::Duration timeout) {
    return registry_.WaitForMembersToLeave(except, absl::Now() + timeout);
  }

  void Shutdown() {
    std::lock_guard<std::mutex> lock(shutdown_mu_);
    if (server_ == nullptr) return;
    // An immediate deadline cancels the long-lived Session streams instead of waiting.
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
  }

 private:
  JobRegistry registry_;  // outlives the server: sessions call into it until OnDone
  RendezvousService rendezvous_;
  JobStatusService job_status_;
  int port_ = 0;
  std::mutex shutdown_mu_;
  std::unique_ptr<grpc::Server> server_;
};

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(const Options& options) {
  auto impl = std::make_unique<Impl>(options);
  RETURN_IF_ERROR(impl->Start(options));
  return std::unique_ptr<RendezvousServer>(new RendezvousServer(std::move(impl)));
}

RendezvousServer::RendezvousServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RendezvousServer::~RendezvousServer() = default;

int RendezvousServer::port() const { return impl_->port(); }
void RendezvousServer::Shutdown() { impl_->Shutdown(); }

bool RendezvousServer::WaitForAgentsToLeave(const std::string& except_node_id,
                                            absl::Duration timeout) {
  return impl_->WaitForAgentsToLeave(except_node_id, timeout);
}

}  // namespace muster::rdzv
