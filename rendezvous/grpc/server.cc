#include "rendezvous/grpc/server.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "base/tsan.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/agent_session.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/grpc/status_cache.h"
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

class WatchReactor;

// The thread that builds Watch snapshots. A snapshot is O(nodes + workers) to copy, convert
// and serialise; built inside a gRPC reaction (the agent message that changed the job, or
// a write completion) it would hold up every stream served by that thread (STYLE: never
// block in a reactor). Pokes that arrive while a watcher waits here are merged into one
// snapshot.
class WatchWriter {
 public:
  WatchWriter() : thread_([this] { Run(); }) {}
  ~WatchWriter() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Queues `watcher` for a snapshot (once, however often it is poked meanwhile).
  void Schedule(std::shared_ptr<WatchReactor> watcher);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<std::weak_ptr<WatchReactor>> queue_;
  std::thread thread_;
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
  WatchWriter writer_;
};

// One JobStatus.Watch stream: writes a snapshot whenever it differs from the last one
// written, one write in flight at a time, and finishes after the job's outcome. Snapshots
// are built on the WatchWriter's thread. Owned by itself (self_) until gRPC calls OnDone;
// the registry and the writer only hold weak references.
class WatchReactor : public grpc::ServerWriteReactor<v1::JobStatusReply>,
                     public StatusWatcher,
                     public std::enable_shared_from_this<WatchReactor> {
 public:
  WatchReactor(JobRegistry* registry, WatchWriter* writer, std::string run_id)
      : registry_(registry), writer_(writer), run_id_(std::move(run_id)) {}

  void Begin(std::shared_ptr<WatchReactor> self) {
    self_ = std::move(self);
    registry_->AddWatcher(std::weak_ptr<StatusWatcher>(shared_from_this()));
    Poke();
  }

  // On the WatchWriter's thread.
  void WriteIfChanged() {
    std::lock_guard<std::mutex> lock(mu_);
    scheduled_ = false;
    if (done_ || in_flight_) return;
    WriteIfChangedLocked();
  }

  // A watch the token check refused: ends at once, alive until OnDone.
  void Refuse(std::shared_ptr<WatchReactor> self, grpc::Status status) {
    self_ = std::move(self);
    std::lock_guard<std::mutex> lock(mu_);
    FinishLocked(std::move(status));
  }

  void Poke() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return;
      if (in_flight_) {
        pending_ = true;
        return;
      }
      if (scheduled_) return;
      scheduled_ = true;
    }
    writer_->Schedule(shared_from_this());
  }

  void OnWriteDone(bool ok) override {
    TsanReaction in(this);
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_ = false;
      if (!ok) return FinishLocked(grpc::Status::OK);  // the client went away
      if (!pending_) {
        if (final_) FinishLocked(grpc::Status::OK);
        return;
      }
      pending_ = false;
      if (scheduled_) return;
      scheduled_ = true;
    }
    writer_->Schedule(shared_from_this());
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
  WatchWriter* const writer_;
  const std::string run_id_;
  std::shared_ptr<WatchReactor> self_;
  std::mutex mu_;
  v1::JobStatusReply reply_;  // the write in flight
  std::string last_;
  bool in_flight_ = false, pending_ = false, final_ = false, done_ = false;
  bool scheduled_ = false;  // queued on the writer
};

void WatchWriter::Schedule(std::shared_ptr<WatchReactor> watcher) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(watcher));
  }
  cv_.notify_one();
}

void WatchWriter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // Capped like every wait; nothing is due on a timeout, the loop just looks again.
    cv_.wait_for(lock, std::chrono::hours(1), [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    std::vector<std::weak_ptr<WatchReactor>> batch;
    batch.swap(queue_);
    lock.unlock();
    for (const auto& weak : batch) {
      if (auto watcher = weak.lock()) watcher->WriteIfChanged();
    }
    lock.lock();
  }
}

grpc::ServerWriteReactor<v1::JobStatusReply>* JobStatusService::Watch(
    grpc::CallbackServerContext* context, const v1::GetJobStatusRequest* request) {
  absl::Status auth = grpc_internal::CheckBearerToken(*context, token_);
  auto reactor = std::make_shared<WatchReactor>(registry_, &writer_, request->run_id());
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
      : registry_(options.run_id, options.heartbeat_interval, options.heartbeat_misses),
        rendezvous_(&registry_, options.token),
        job_status_(&registry_, options.token) {}

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
        {options.heartbeat_interval, options.heartbeat_interval * options.heartbeat_misses},
        &builder);
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
