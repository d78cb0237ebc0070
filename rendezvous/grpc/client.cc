#include "rendezvous/grpc/client.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "base/tsan.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/connect.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/wire/proto_convert.h"
#include "rendezvous/wire/stacks_convert.h"
#include "rendezvous/wire/status_convert.h"
#include "rendezvous/wire/traces_convert.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv {
namespace {

using wire::ToAbslCode;

// After Leave, the destructor gives the Leave message this long to reach the server
// before it cancels the stream.
constexpr absl::Duration kLeaveGrace = absl::Seconds(1);

// The client's end of the Session stream: one read always pending, writes queued with one
// in flight. A hold keeps the reactor alive while writes may still be started from other
// threads; it is released once the stream can take no more writes. Thread-safe.
class AgentStream : public grpc::ClientBidiReactor<v1::AgentMessage, v1::ServerMessage> {
 public:
  using MessageFn = std::function<void(const v1::ServerMessage&)>;
  using DoneFn = std::function<void(const grpc::Status&)>;

  AgentStream(MessageFn on_message, DoneFn on_done)
      : on_message_(std::move(on_message)), on_done_(std::move(on_done)) {}

  // Starts the call; `first` is written, in order, before anything sent later.
  void Begin(v1::Rendezvous::Stub* stub, const std::string& token,
             std::vector<v1::AgentMessage> first) {
    grpc_internal::AddBearerToken(token, &context_);
    {
      // Builds gRPC's side of the call (in its header code, on this thread), which its
      // threads then use: gRPC's own accesses, like those inside every other call out.
      TsanCallOut out(this);
      stub->async()->Session(&context_, this);
      AddHold();
    }
    StartNextRead();
    for (v1::AgentMessage& msg : first) Send(std::move(msg));
    TsanCallOut out(this);
    StartCall();
  }

  // False when the stream takes no more writes.
  bool Send(v1::AgentMessage msg) {
    const v1::AgentMessage* next = nullptr;
    {
      MutexLock lock(&mu_);
      if (closed_) return false;
      out_.push_back(std::move(msg));
      if (writing_) return true;
      writing_ = true;
      next = &out_.front();
    }
    TsanCallOut out(this);
    StartWrite(next);
    return true;
  }

  void Cancel() {
    TsanCallOut out(this);
    context_.TryCancel();
  }

  // True once OnDone has run (false when `timeout` passed first).
  bool WaitDone(absl::Duration timeout) {
    MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + timeout;
    while (!done_) {
      if (done_cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return done_;
  }
  void WaitDone() {
    MutexLock lock(&mu_);
    while (!done_) done_cv_.Wait(&mu_);
  }

  void OnReadDone(bool ok) override {
    TsanReaction in(this);
    if (ok) {
      on_message_(*in_);
      StartNextRead();
      return;
    }
    ReleaseHoldIfClosed(/*only_if_closed=*/false);
  }

  void OnWriteDone(bool ok) override {
    TsanReaction in(this);
    const v1::AgentMessage* next = nullptr;
    {
      MutexLock lock(&mu_);
      out_.pop_front();
      writing_ = false;
      if (!ok) {
        closed_ = true;
        out_.clear();
      }
      if (!out_.empty()) {
        writing_ = true;
        next = &out_.front();
      }
    }
    if (next != nullptr) {
      TsanCallOut out(this);
      StartWrite(next);
    } else {
      ReleaseHoldIfClosed(/*only_if_closed=*/true);
    }
  }

  void OnDone(const grpc::Status& status) override {
    TsanAcquire(this);  // not a TsanReaction: the owner may delete `this` once done_ is set
    on_done_(status);
    MutexLock lock(&mu_);
    done_ = true;
    done_cv_.SignalAll();
  }

 private:
  // Marks the stream closed (or, with `only_if_closed`, acts only if it already is) and
  // releases the hold once no write is in flight, which lets OnDone follow.
  void ReleaseHoldIfClosed(bool only_if_closed) {
    bool release = false;
    {
      MutexLock lock(&mu_);
      if (only_if_closed && !closed_) return;
      closed_ = true;
      if (!writing_ && !hold_released_) release = hold_released_ = true;
    }
    if (!release) return;
    TsanCallOut out(this);
    RemoveHold();
  }

  // Each read fills a new message: gRPC parses it on the thread that completes the read,
  // before the reaction (and its TsanReaction) runs, so the message must carry no history
  // of this thread for TSan to hold against that parse (base/tsan.h).
  void StartNextRead() {
    TsanCallOut out(this);
    in_ = std::make_unique<v1::ServerMessage>();
    StartRead(in_.get());
  }

  const MessageFn on_message_;
  const DoneFn on_done_;
  grpc::ClientContext context_;
  std::unique_ptr<v1::ServerMessage> in_;  // the read in flight; touched by read reactions only

  Mutex mu_;
  CondVar done_cv_;
  std::deque<v1::AgentMessage> out_ ABSL_GUARDED_BY(mu_);  // front is in flight while writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// What the posted closures touch, on the loop thread only; outlives the client when
// closures are still queued on the loop at destruction.
struct LoopSide {
  RendezvousClient::EventSink events;
  RendezvousClient::ErrorSink errors;
  bool alive = true;
  bool error_sent = false;
};

// Where a stacks reply goes: the client while it lives (replies come from other threads,
// possibly after the client is gone).
struct ReplyRoute {
  Mutex mu;
  std::function<void(v1::AgentMessage)> send ABSL_GUARDED_BY(mu);
};

// Permanent refusals keep their code; anything else ending the stream is a lost server.
bool IsRefusal(absl::StatusCode code) {
  return code == absl::StatusCode::kUnauthenticated || code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kFailedPrecondition ||
         code == absl::StatusCode::kAlreadyExists || code == absl::StatusCode::kPermissionDenied;
}

}  // namespace

class GrpcRendezvousClient::Impl {
 public:
  Impl(Options options, std::shared_ptr<grpc::ChannelCredentials> creds)
      : options_(std::move(options)),
        creds_(std::move(creds)),
        loop_side_(std::make_shared<LoopSide>()),
        reply_route_(std::make_shared<ReplyRoute>()) {
    MutexLock lock(&reply_route_->mu);
    reply_route_->send = [this](v1::AgentMessage msg) { Send(std::move(msg)); };
  }

  ~Impl() {
    loop_side_->alive = false;
    {
      MutexLock lock(&reply_route_->mu);
      reply_route_->send = nullptr;
    }
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.SignalAll();
    if (worker_.joinable()) worker_.join();
    if (stream_ != nullptr) {
      if (!leaving_ && finished_) {
        // The job is over: end the stream after what is still queued (the last workers'
        // ends, reported while the agent stopped them) instead of cancelling it under them.
        v1::AgentMessage msg;
        msg.mutable_leave()->set_why("job finished");
        leaving_ = stream_->Send(std::move(msg));
      }
      if (!leaving_ || !stream_->WaitDone(kLeaveGrace)) stream_->Cancel();
      stream_->WaitDone();  // Cancel guarantees OnDone
    }
  }

  void Start(const NodeInfo& node, const JobSpec& spec, EventSink events, ErrorSink errors) {
    node_ = node;
    spec_ = spec;
    loop_side_->events = std::move(events);
    loop_side_->errors = std::move(errors);
    worker_ = std::thread([this] { Run(); });
  }

  void Send(v1::AgentMessage msg) {
    AgentStream* stream = nullptr;
    {
      MutexLock lock(&mu_);
      if (stream_ == nullptr) {
        pending_.push_back(std::move(msg));
        return;
      }
      stream = stream_.get();
    }
    stream->Send(std::move(msg));
  }

  void Leave(const std::string& why) {
    leaving_ = true;
    v1::AgentMessage msg;
    msg.mutable_leave()->set_why(why);
    {
      MutexLock lock(&mu_);
      if (stream_ == nullptr) {  // not connected yet: stop trying
        stop_ = true;
        cv_.SignalAll();
        return;
      }
    }
    Send(std::move(msg));
  }

  bool WaitStreamEnded(absl::Duration timeout) {
    AgentStream* stream = nullptr;
    {
      MutexLock lock(&mu_);
      stream = stream_.get();
    }
    // OnStreamDone (and its PostError) runs before WaitDone returns true.
    return stream != nullptr && stream->WaitDone(timeout);
  }

 private:
  // The client's thread: reach the server and open the stream. Liveness is the
  // connection's from then on (TCP keepalive both ways, docs/operations/liveness-and-partitions.md
  // "muster's own rendezvous (gRPC)"): no heartbeat messages, which cost the server ~70 us of CPU
  // each.
  void Run() {
    absl::Time started = absl::Now();
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = grpc_internal::ConnectWithBackoff(
        options_.endpoint, creds_, started, started + options_.join_timeout,
        [this](absl::Duration d) { return SleepUnlessStopped(d); },
        // The server declares us lost after interval x misses of silence; we declare it
        // lost on the same scale (a probe after an interval of silence, reset after
        // interval x misses in all).
        spec_.heartbeat_interval,
        spec_.heartbeat_interval * std::max(1, spec_.heartbeat_misses - 1));
    if (!channel.ok()) {
      if (!absl::IsCancelled(channel.status())) PostError(channel.status());
      return;
    }
    {
      MutexLock lock(&mu_);
      if (stop_) return;
      stub_ = v1::Rendezvous::NewStub(*channel);
      stream_ = std::make_unique<AgentStream>(
          [this](const v1::ServerMessage& msg) { OnMessage(msg); },
          [this](const grpc::Status& status) { OnStreamDone(status); });
      std::vector<v1::AgentMessage> first(1);
      wire::ToProto(node_, spec_, first[0].mutable_join());
      for (v1::AgentMessage& msg : pending_) first.push_back(std::move(msg));
      pending_.clear();
      stream_->Begin(stub_.get(), options_.token, std::move(first));
    }
    spdlog::info("rendezvous: joining job {} at {} as {} ({})", spec_.run_id,
                 options_.endpoint.ToString(), node_.host, node_.node_id);
  }

  // False when stopped (at once, or during the sleep).
  bool SleepUnlessStopped(absl::Duration d) {
    MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + d;
    while (!stop_) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return !stop_;
  }

  void OnMessage(const v1::ServerMessage& msg) {
    if (msg.kind_case() == v1::ServerMessage::kError) {
      refused_ = true;
      PostError(absl::Status(ToAbslCode(msg.error().code()), msg.error().message()));
      return;
    }
    if (msg.kind_case() == v1::ServerMessage::kStacksRequest) return OnStacksRequest(msg);
    Event event;
    if (!wire::FromProto(msg, node_.node_id, &event)) return;  // unknown: newer server
    if (event.kind == Event::Kind::kFinished) finished_ = true;
    options_.loop->Post([side = loop_side_, event = std::move(event)] {
      if (side->alive && !side->error_sent && side->events) side->events(event);
    });
  }

  // Hands the request to the agent's handler on the loop; its reply goes back on the stream.
  void OnStacksRequest(const v1::ServerMessage& msg) {
    if (!options_.on_stacks_request) return;
    int64_t id = msg.stacks_request().id();
    absl::Duration timeout = absl::Milliseconds(msg.stacks_request().timeout_ms());
    GrpcRendezvousClient::StacksReply reply = [route = reply_route_,
                                               id](std::vector<RankStack> ranks) {
      v1::AgentMessage answer;
      answer.mutable_stacks()->set_id(id);
      for (const RankStack& r : ranks) {
        wire::ToProto(r, answer.mutable_stacks()->add_ranks());
      }
      MutexLock lock(&route->mu);
      if (route->send) route->send(std::move(answer));
    };
    options_.loop->Post([side = loop_side_, handler = options_.on_stacks_request, timeout,
                         reply = std::move(reply)]() mutable {
      if (side->alive) handler(timeout, std::move(reply));
    });
  }

  void OnStreamDone(const grpc::Status& status) {
    if (leaving_ || finished_ || refused_) return;
    absl::Status ended = wire::ToAbslStatus(status);
    if (IsRefusal(ended.code())) {
      PostError(std::move(ended));
      return;
    }
    std::string why = ended.ok() ? "the server closed it" : std::string(ended.message());
    PostError(absl::UnavailableError(
        absl::StrCat("lost the rendezvous stream to ", options_.endpoint.ToString(), ": ", why)));
  }

  void PostError(absl::Status error) {
    spdlog::debug("rendezvous client error: {}", error.ToString());
    options_.loop->Post([side = loop_side_, error = std::move(error)] {
      if (!side->alive || side->error_sent) return;
      side->error_sent = true;
      if (side->errors) side->errors(RendezvousError{.status = error});
    });
  }

  const Options options_;
  const std::shared_ptr<grpc::ChannelCredentials> creds_;
  const std::shared_ptr<LoopSide> loop_side_;
  const std::shared_ptr<ReplyRoute> reply_route_;
  NodeInfo node_;  // set by Start, before the thread exists
  JobSpec spec_;
  std::atomic<bool> leaving_{false};
  std::atomic<bool> finished_{false};  // Finished received: the stream's end is expected
  std::atomic<bool> refused_{false};   // Error received and reported

  Mutex mu_;
  CondVar cv_;  // stop_
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Reports made before the stream existed.
  std::vector<v1::AgentMessage> pending_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<v1::Rendezvous::Stub> stub_ ABSL_GUARDED_BY(mu_);
  // Set once by the thread; kept until destruction, which reads it unlocked once the
  // thread is joined.
  std::unique_ptr<AgentStream> stream_ ABSL_GUARDED_BY(mu_);
  std::thread worker_;
};

absl::StatusOr<std::unique_ptr<GrpcRendezvousClient>> GrpcRendezvousClient::Create(
    const Options& options) {
  if (options.loop == nullptr) return absl::InvalidArgumentError("rendezvous client needs a loop");
  RETURN_IF_ERROR(grpc_internal::CheckDialTarget(options.endpoint));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                   grpc_internal::MakeChannelCredentials(options.tls_ca_file, options.tls_cert_file,
                                                         options.tls_key_file));
  return std::unique_ptr<GrpcRendezvousClient>(
      new GrpcRendezvousClient(std::make_unique<Impl>(options, std::move(creds))));
}

GrpcRendezvousClient::GrpcRendezvousClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcRendezvousClient::~GrpcRendezvousClient() = default;

void GrpcRendezvousClient::Start(const NodeInfo& node, const JobSpec& spec, EventSink events,
                                 ErrorSink errors) {
  impl_->Start(node, spec, std::move(events), std::move(errors));
}

void GrpcRendezvousClient::ReportFailure(int round, const Failure& failure) {
  v1::AgentMessage msg;
  msg.mutable_worker_failed()->set_round(round);
  wire::ToProto(failure, msg.mutable_worker_failed()->mutable_failure());
  impl_->Send(std::move(msg));
}

void GrpcRendezvousClient::ReportSucceeded(int round) {
  v1::AgentMessage msg;
  msg.mutable_workers_succeeded()->set_round(round);
  impl_->Send(std::move(msg));
}

void GrpcRendezvousClient::ReportWorkersStarted(int round,
                                                const std::vector<StartedWorker>& workers) {
  v1::AgentMessage msg;
  wire::ToProto(round, workers, msg.mutable_workers_started());
  impl_->Send(std::move(msg));
}

void GrpcRendezvousClient::ReportWorkerEnded(int round, const EndedWorker& worker) {
  v1::AgentMessage msg;
  wire::ToProto(round, worker, msg.mutable_worker_ended());
  impl_->Send(std::move(msg));
}

void GrpcRendezvousClient::ReportStalled(int round, const Stall& stall) {
  v1::AgentMessage msg;
  v1::Stalled* out = msg.mutable_stalled();
  out->set_round(round);
  out->set_stalled(stall.stalled);
  out->set_restartable(stall.restartable);
  for (const RankStack& r : stall.ranks) wire::ToProto(r, out->add_ranks());
  impl_->Send(std::move(msg));
}

void GrpcRendezvousClient::ReportSample(int round, const StragglerSample& sample) {
  v1::AgentMessage msg;
  wire::ToProto(round, sample, msg.mutable_straggler_sample());
  impl_->Send(std::move(msg));
}

void GrpcRendezvousClient::ReportHealth(const std::string& excluded) {
  v1::AgentMessage msg;
  msg.mutable_health()->set_excluded(excluded);
  impl_->Send(std::move(msg));
}

void GrpcRendezvousClient::ReportStopped(int round, int store_port) {
  v1::AgentMessage msg;
  msg.mutable_workers_stopped()->set_round(round);
  msg.mutable_workers_stopped()->set_store_port(store_port);
  impl_->Send(std::move(msg));
}

void GrpcRendezvousClient::Preempt(const std::string& reason) {
  v1::AgentMessage msg;
  msg.mutable_preempt()->set_reason(reason);
  impl_->Send(std::move(msg));
}

bool GrpcRendezvousClient::UploadTraces(const std::vector<TraceChunk>& chunks) {
  for (const TraceChunk& chunk : chunks) {
    v1::AgentMessage msg;
    wire::ToProto(chunk, msg.mutable_traces());
    impl_->Send(std::move(msg));
  }
  return true;
}

void GrpcRendezvousClient::Leave(const std::string& why) { impl_->Leave(why); }

bool GrpcRendezvousClient::WaitStreamEnded(absl::Duration timeout) {
  return impl_->WaitStreamEnded(timeout);
}

}  // namespace muster::rdzv
