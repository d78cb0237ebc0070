#include "rendezvous/grpc/job_status_service.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <chrono>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "base/tsan.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/grpc/status_cache.h"
#include "rendezvous/wire/proto_convert.h"
#include "rendezvous/wire/status_convert.h"

namespace muster::rdzv::grpc_internal {

using wire::ToGrpcStatus;
using wire::ToProto;
namespace {

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
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.SignalAll();
    thread_.join();
  }
  // Queues `watcher` for a snapshot (once, however often it is poked meanwhile).
  void Schedule(std::shared_ptr<WatchReactor> watcher);

 private:
  void Run();

  Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::weak_ptr<WatchReactor>> queue_ ABSL_GUARDED_BY(mu_);
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
    grpc::Status status = ToGrpcStatus(Answer(*context, *request, reply));
    TsanCallOut out(reactor);  // gRPC's own reactor: it calls nothing of ours back
    reactor->Finish(std::move(status));
    return reactor;
  }

  grpc::ServerWriteReactor<v1::JobStatusReply>* Watch(
      grpc::CallbackServerContext* context, const v1::GetJobStatusRequest* request) override;

  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const v1::ListJobsRequest* /*request*/,
                                 v1::ListJobsReply* reply) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    absl::Status allowed = CheckBearerToken(*context, token_);
    if (allowed.ok()) {
      // O(jobs + nodes) under the registry's lock, once per (rare, human) call.
      for (const JobSummary& s : registry_->Summaries()) ToProto(s, reply->add_jobs());
    }
    TsanCallOut out(reactor);
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }

 private:
  absl::Status Answer(const grpc::CallbackServerContext& context, const grpc::ByteBuffer& request,
                      grpc::ByteBuffer* reply) {
    RETURN_IF_ERROR(CheckBearerToken(context, token_));
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
  StatusCache cache_;
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
    MutexLock lock(&mu_);
    scheduled_ = false;
    if (done_ || in_flight_) return;
    WriteIfChangedLocked();
  }

  // A watch the token check refused: ends at once, alive until OnDone.
  void Refuse(std::shared_ptr<WatchReactor> self, grpc::Status status) {
    self_ = std::move(self);
    MutexLock lock(&mu_);
    FinishLocked(std::move(status));
  }

  void Poke() override {
    {
      MutexLock lock(&mu_);
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
      MutexLock lock(&mu_);
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
    MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    TsanAcquire(this);  // not a TsanReaction: `this` may be gone when it returns
    self_.reset();
  }

 private:
  void WriteIfChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<JobStatusSnapshot> status = registry_->Status(run_id_);
    if (!status.ok()) return FinishLocked(ToGrpcStatus(status.status()));
    v1::JobStatusReply reply;
    ToProto(*status, &reply);
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

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (done_) return;
    done_ = true;
    TsanCallOut out(this);
    Finish(std::move(status));
  }

  JobRegistry* const registry_;
  WatchWriter* const writer_;
  const std::string run_id_;
  std::shared_ptr<WatchReactor> self_;
  Mutex mu_;
  v1::JobStatusReply reply_ ABSL_GUARDED_BY(mu_);  // the write in flight
  std::string last_ ABSL_GUARDED_BY(mu_);
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_ ABSL_GUARDED_BY(mu_) = false;
  bool final_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool scheduled_ ABSL_GUARDED_BY(mu_) = false;  // queued on the writer
};

void WatchWriter::Schedule(std::shared_ptr<WatchReactor> watcher) {
  {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(watcher));
  }
  cv_.Signal();
}

void WatchWriter::Run() {
  MutexLock lock(&mu_);
  while (true) {
    // Capped like every wait; nothing is due on a timeout, the loop just looks again.
    if (!stopping_ && queue_.empty()) cv_.WaitWithTimeout(&mu_, absl::Hours(1));
    if (stopping_) return;
    std::vector<std::weak_ptr<WatchReactor>> batch;
    batch.swap(queue_);
    mu_.Unlock();
    for (const auto& weak : batch) {
      if (auto watcher = weak.lock()) watcher->WriteIfChanged();
    }
    mu_.Lock();
  }
}

grpc::ServerWriteReactor<v1::JobStatusReply>* JobStatusService::Watch(
    grpc::CallbackServerContext* context, const v1::GetJobStatusRequest* request) {
  absl::Status auth = CheckBearerToken(*context, token_);
  auto reactor = std::make_shared<WatchReactor>(registry_, &writer_, request->run_id());
  WatchReactor* raw = reactor.get();
  if (!auth.ok()) {
    raw->Refuse(std::move(reactor), ToGrpcStatus(auth));
    return raw;
  }
  raw->Begin(std::move(reactor));
  return raw;
}

}  // namespace

std::unique_ptr<grpc::Service> NewJobStatusService(JobRegistry* registry, std::string token) {
  return std::make_unique<JobStatusService>(registry, std::move(token));
}

}  // namespace muster::rdzv::grpc_internal
