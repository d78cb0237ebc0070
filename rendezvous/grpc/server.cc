#include "rendezvous/grpc/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <memory>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "base/tsan.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/agent_session.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/grpc/job_status_service.h"
#include "rendezvous/grpc/status_convert.h"
#include "rendezvous/grpc/tcp_keepalive.h"
#include "rendezvous/registry/job_registry.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv {
namespace {

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

}  // namespace

class RendezvousServer::Impl {
 public:
  explicit Impl(const Options& options)
      : registry_(options.run_id, options.heartbeat_interval, options.heartbeat_misses),
        rendezvous_(&registry_, options.token),
        job_status_(grpc_internal::NewJobStatusService(&registry_, options.token)) {}

  ~Impl() { Shutdown(); }

  absl::Status Start(const Options& options) {
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                     grpc_internal::MakeServerCredentials(
                         options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file));
    // Process-wide switch: every server built from now on serves grpc.health.v1.
    grpc::EnableDefaultHealthCheckService(true);
    // Process-wide too: Debian's abseil is built with debug-mode deadlock detection, which
    // records every absl::Mutex gRPC takes in a lock graph (14 % of the server's CPU while
    // 4096 agents join). Our own locks are std::mutex and do not use it.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    grpc::ServerBuilder builder;
    // gRPC sets SO_REUSEPORT by default; two servers sharing a port would split a job.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // Agents before TCP keepalive pinged as often as they heartbeat (HTTP/2 keepalive):
    // accept it instead of answering "too many pings" with GOAWAY.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 100);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    grpc_internal::AddTcpKeepalive(
        grpc_internal::TcpKeepalive{
            .probe_interval = options.heartbeat_interval,
            .timeout = options.heartbeat_interval * options.heartbeat_misses},
        &builder);
    builder.AddListeningPort(options.listen_address, creds, &port_);
    builder.RegisterService(&rendezvous_);
    builder.RegisterService(job_status_.get());
    std::lock_guard<std::mutex> lock(shutdown_mu_);
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
  std::unique_ptr<grpc::Service> job_status_;
  int port_ = 0;
  std::mutex shutdown_mu_;
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(shutdown_mu_);
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
