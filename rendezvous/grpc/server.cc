#include "rendezvous/grpc/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_posix.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "base/tsan.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/agent_session.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/grpc/drain_service.h"
#include "rendezvous/grpc/job_status_service.h"
#include "rendezvous/grpc/stacks_service.h"
#include "rendezvous/grpc/tcp_keepalive.h"
#include "rendezvous/registry/job_registry.h"
#include "rendezvous/registry/trace_store.h"
#include "rendezvous/wire/status_convert.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv {
namespace {

// Ends a stream at once with `status` (a refused token); deletes itself when done.
class RejectedSession : public grpc_internal::SessionReactor {
 public:
  explicit RejectedSession(const absl::Status& status) {
    grpc::Status refusal = wire::ToGrpcStatus(status);
    TsanCallOut out(this);
    Finish(std::move(refusal));
  }
  void OnDone() override {
    TsanAcquire(this);
    delete this;
  }
};

// gRPC names an adopted connection "fd:N" (grpc_server_add_insecure_channel_from_fd);
// the agent's address is read from its peer (agent_session.cc), so the shared port's
// "ipv4:addr:port" is kept per fd. An fd number is reused only after its connection is
// closed, and a session reads its peer while its connection is open.
class AdoptedPeers {
 public:
  void Record(int fd, std::string peer) {
    MutexLock lock(&mu_);
    peers_[absl::StrCat("fd:", fd)] = std::move(peer);
  }
  std::string Resolve(const std::string& grpc_peer) {
    MutexLock lock(&mu_);
    auto it = peers_.find(grpc_peer);
    return it == peers_.end() ? grpc_peer : it->second;
  }

 private:
  Mutex mu_;
  absl::flat_hash_map<std::string, std::string> peers_;
};

// "[::ffff:10.0.0.1]:5000" / "10.0.0.1:5000" (c10d::FormatPeer) in gRPC's peer form.
std::string GrpcPeerName(const std::string& peer) {
  if (peer.rfind("[::ffff:", 0) == 0) {
    std::string v4 = peer.substr(8);
    size_t close = v4.find(']');
    if (close != std::string::npos) return absl::StrCat("ipv4:", v4.erase(close, 1));
  }
  return absl::StrCat(peer.rfind('[', 0) == 0 ? "ipv6:" : "ipv4:", peer);
}

class RendezvousService final : public v1::Rendezvous::CallbackService {
 public:
  RendezvousService(JobRegistry* registry, StacksBroker* stacks, std::string token,
                    AdoptedPeers* peers)
      : registry_(registry), stacks_(stacks), token_(std::move(token)), peers_(peers) {}

  grpc_internal::SessionReactor* Session(grpc::CallbackServerContext* context) override {
    std::string peer = peers_->Resolve(context->peer());
    absl::Status auth = grpc_internal::CheckBearerToken(*context, token_);
    if (!auth.ok()) {
      spdlog::warn("rendezvous: refused a session from {}: {}", peer, std::string(auth.message()));
      return new RejectedSession(auth);
    }
    return grpc_internal::NewAgentSession(registry_, stacks_, std::move(peer));
  }

 private:
  JobRegistry* const registry_;
  StacksBroker* const stacks_;
  const std::string token_;
  AdoptedPeers* const peers_;
};

}  // namespace

class RendezvousServer::Impl {
 public:
  explicit Impl(const Options& options)
      : registry_(options.run_id, options.heartbeat_interval, options.heartbeat_misses,
                  options.job_retention),
        rendezvous_(&registry_, &stacks_broker_, options.token, &adopted_peers_),
        keepalive_{.probe_interval = options.heartbeat_interval,
                   .timeout = options.heartbeat_interval * options.heartbeat_misses},
        job_status_(grpc_internal::NewJobStatusService(&registry_, options.token)),
        stacks_(grpc_internal::NewStacksService(&registry_, &stacks_broker_, options.token)),
        drain_(grpc_internal::NewDrainService(&registry_, options.token)) {
    registry_.SetObserver(options.observer);
  }

  ~Impl() { Shutdown(); }

  absl::Status Start(const Options& options) {
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                     grpc_internal::MakeServerCredentials(
                         options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file));
    // Process-wide switch: every server built from now on serves grpc.health.v1.
    grpc::EnableDefaultHealthCheckService(true);
    // Process-wide too: Debian's abseil is built with debug-mode deadlock detection, which
    // records every absl::Mutex gRPC takes in a lock graph (14 % of the server's CPU while
    // 4096 agents join). Our own locks are Mutex and do not use it.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    grpc::ServerBuilder builder;
    // gRPC sets SO_REUSEPORT by default; two servers sharing a port would split a job.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    // Agents before TCP keepalive pinged as often as they heartbeat (HTTP/2 keepalive):
    // accept it instead of answering "too many pings" with GOAWAY.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 100);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    grpc_internal::AddTcpKeepalive(keepalive_, &builder);
    const bool listens = !options.listen_address.empty();
    if (listens) builder.AddListeningPort(options.listen_address, creds, &port_);
    builder.RegisterService(&rendezvous_);
    builder.RegisterService(job_status_.get());
    builder.RegisterService(stacks_.get());
    builder.RegisterService(drain_.get());
    MutexLock lock(&shutdown_mu_);
    server_ = builder.BuildAndStart();
    if (!listens && server_ != nullptr) return absl::OkStatus();  // the shared port logs
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

  void AdoptConnection(int fd, const std::string& peer) {
    // gRPC's tcp_server sets these on sockets it accepts (the keepalive mutator is not
    // applied to adopted ones).
    absl::Status keepalive = grpc_internal::SetTcpKeepalive(fd, keepalive_);
    if (!keepalive.ok()) spdlog::warn("rendezvous: {}", keepalive.ToString());
    adopted_peers_.Record(fd, GrpcPeerName(peer));
    MutexLock lock(&shutdown_mu_);
    if (server_ == nullptr) {
      ::close(fd);
      return;
    }
    grpc::AddInsecureChannelFromFd(server_.get(), fd);
  }

  bool WaitForAgentsToLeave(const std::string& except, absl::Duration timeout) {
    return registry_.WaitForMembersToLeave(except, absl::Now() + timeout);
  }

  RegistryCounts Counts() const { return registry_.Counts(); }

  void KeepTracesIn(const std::string& root, bool per_job, const std::string& host) {
    registry_.SetTraceStore(std::make_shared<TraceStore>(root, per_job, host));
  }

  void Shutdown() {
    MutexLock lock(&shutdown_mu_);
    if (server_ == nullptr) return;
    // An immediate deadline cancels the long-lived Session streams instead of waiting.
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
  }

 private:
  JobRegistry registry_;        // outlives the server: sessions call into it until OnDone
  StacksBroker stacks_broker_;  // likewise
  AdoptedPeers adopted_peers_;
  RendezvousService rendezvous_;
  const grpc_internal::TcpKeepalive keepalive_;
  std::unique_ptr<grpc::Service> job_status_;
  std::unique_ptr<grpc::Service> stacks_;
  std::unique_ptr<grpc::Service> drain_;
  int port_ = 0;
  Mutex shutdown_mu_;
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
void RendezvousServer::AdoptConnection(int fd, const std::string& peer) {
  impl_->AdoptConnection(fd, peer);
}
void RendezvousServer::Shutdown() { impl_->Shutdown(); }

RegistryCounts RendezvousServer::Counts() const { return impl_->Counts(); }

void RendezvousServer::KeepTracesIn(const std::string& root, bool per_job,
                                    const std::string& host) {
  impl_->KeepTracesIn(root, per_job, host);
}

bool RendezvousServer::WaitForAgentsToLeave(const std::string& except_node_id,
                                            absl::Duration timeout) {
  return impl_->WaitForAgentsToLeave(except_node_id, timeout);
}

}  // namespace muster::rdzv
