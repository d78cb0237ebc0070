#include "rendezvous/grpc/health_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "base/tsan.h"

namespace muster::rdzv {
namespace {

// Answers every method but the health service with UNIMPLEMENTED. Its real job: gRPC
// refuses to build a server whose only service is the built-in health check ("at least
// one completion queue must be frequently polled"); a callback service satisfies it.
class Unimplemented : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() {
        TsanCallOut out(this);
        Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
      }
      void OnDone() override {
        TsanAcquire(this);
        delete this;
      }
    };
    return new Reactor;
  }
};

}  // namespace

class HealthServer::Impl {
 public:
  absl::Status Start(const std::string& listen_address) {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    // One port, one owner: without this gRPC would silently share a busy port.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort(listen_address, grpc::InsecureServerCredentials(), &port_);
    builder.RegisterCallbackGenericService(&unimplemented_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("--health-port: cannot listen on ", listen_address, " (in use?)"));
    }
    SetReady(false);
    SetWorkersRunning(false);
    // Liveness: the agent answers, so it is alive, through rendezvous and restarts too
    // (probing readiness for liveness would kill Pods that are merely waiting for peers).
    server_->GetHealthCheckService()->SetServingStatus("muster.v1.Liveness", true);
    return absl::OkStatus();
  }
  ~Impl() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }
  int port() const { return port_; }
  // Per name: the overload without one would set every service, liveness included.
  void SetReady(bool ready) {
    grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
    health->SetServingStatus("", ready);
    health->SetServingStatus("muster.v1.Ready", ready);
  }
  void SetWorkersRunning(bool running) {
    grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
    health->SetServingStatus("muster.v1.Workers", running);
    health->SetServingStatus("muster.v1.Agent", running);
  }

 private:
  Unimplemented unimplemented_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    const std::string& listen_address) {
  auto impl = std::make_unique<Impl>();
  absl::Status st = impl->Start(listen_address);
  if (!st.ok()) return st;
  return std::unique_ptr<HealthServer>(new HealthServer(std::move(impl)));
}

HealthServer::HealthServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HealthServer::~HealthServer() = default;
int HealthServer::port() const { return impl_->port(); }
void HealthServer::SetReady(bool ready) { impl_->SetReady(ready); }
void HealthServer::SetWorkersRunning(bool running) { impl_->SetWorkersRunning(running); }

}  // namespace muster::rdzv
