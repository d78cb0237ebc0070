#include "rendezvous/grpc/agent_session.h"

#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/tsan.h"
#include "muster/v1/rendezvous.pb.h"
#include "rendezvous/wire/proto_convert.h"
#include "rendezvous/wire/stacks_convert.h"
#include "rendezvous/wire/status_convert.h"
#include "rendezvous/wire/traces_convert.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::grpc_internal {

using wire::FromProto;
using wire::ToGrpcStatus;
using wire::ToProto;
using wire::ToWireCode;

namespace {

class AgentSession : public SessionReactor,
                     public NodeStream,
                     public std::enable_shared_from_this<AgentSession> {
 public:
  AgentSession(JobRegistry* registry, StacksBroker* stacks, std::string peer)
      : registry_(registry), stacks_(stacks), peer_(std::move(peer)) {}

  void Begin(std::shared_ptr<AgentSession> self) {
    self_ = std::move(self);
    StartNextRead();
  }

  void Enqueue(const Event& event) override {
    MutexLock lock(&mu_);
    if (finish_requested_) return;
    ToProto(event, &out_.emplace_back());
  }

  void RequestStacks(int64_t id, absl::Duration timeout) override {
    {
      MutexLock lock(&mu_);
      if (finish_requested_) return;
      v1::StacksRequest* request = out_.emplace_back().mutable_stacks_request();
      request->set_id(id);
      request->set_timeout_ms(absl::ToInt64Milliseconds(timeout));
    }
    Flush();
  }

  void Flush() override {
    const v1::ServerMessage* next = nullptr;
    {
      MutexLock lock(&mu_);
      if (writing_ || out_.empty() || finish_called_) return;
      writing_ = true;
      next = &out_.front();
    }
    TsanCallOut out(this);
    StartWrite(next);
  }

  void OnReadDone(bool ok) override {
    TsanReaction in(this);
    if (!ok) {  // the agent closed the stream, or it failed
      ReportLost("stream closed");
      RequestFinish(grpc::Status::OK);
      return;
    }
    if (!Handle(*in_)) return;
    StartNextRead();
  }

  void OnWriteDone(bool ok) override {
    TsanReaction in(this);
    const v1::ServerMessage* next = nullptr;
    bool finish = false;
    grpc::Status status;
    {
      MutexLock lock(&mu_);
      out_.pop_front();
      writing_ = false;
      if (!ok) out_.clear();  // the stream is broken; the pending read fails too
      if (!out_.empty()) {
        writing_ = true;
        next = &out_.front();
      } else if (finish_requested_ && !finish_called_) {
        finish = finish_called_ = true;
        status = finish_status_;
      }
    }
    if (next != nullptr) {
      TsanCallOut out(this);
      StartWrite(next);
    }
    if (finish) {
      TsanCallOut out(this);
      Finish(std::move(status));
    }
  }

  void OnDone() override {
    TsanAcquire(this);  // not a TsanReaction: `this` may be gone when it returns
    ReportLost("stream ended");
    // The last reference may be this one; nothing may touch `this` after the reset.
    std::shared_ptr<AgentSession> self = std::move(self_);
  }

 private:
  // Each read fills a new message: gRPC parses it on the thread that completes the read,
  // before the reaction (and its TsanReaction) runs, so the message must carry no history
  // of this thread for TSan to hold against that parse (base/tsan.h).
  void StartNextRead() {
    TsanCallOut out(this);
    in_ = std::make_unique<v1::AgentMessage>();
    StartRead(in_.get());
  }

  // Returns false when the stream is being finished (no further reads).
  bool Handle(const v1::AgentMessage& msg) {
    if (node_id_.empty()) {
      if (msg.kind_case() != v1::AgentMessage::kJoin) {
        Refuse(absl::InvalidArgumentError("the first message of a session must be Join"));
        return false;
      }
      NodeInfo node;
      JobSpec spec;
      FromProto(msg.join(), &node, &spec);
      // An agent that did not name its address (no --local-addr, no POD_IP) is reachable
      // where the server sees it: that address is checked, unlike a guessed FQDN.
      if (node.address.empty()) node.address = PeerHost(peer_);
      absl::Status joined = registry_->Join(shared_from_this(), node, spec);
      if (!joined.ok()) {
        spdlog::warn("rendezvous: refused {} from {}: {}", node.host, peer_, joined.ToString());
        Refuse(joined);
        return false;
      }
      MutexLock lock(&mu_);
      node_id_ = node.node_id;
      return true;
    }
    switch (msg.kind_case()) {
      case v1::AgentMessage::kHeartbeat:
        registry_->Heartbeat(node_id_);
        break;
      case v1::AgentMessage::kWorkerFailed:
        registry_->WorkerFailed(node_id_, msg.worker_failed().round(),
                                FromProto(msg.worker_failed().failure()));
        break;
      case v1::AgentMessage::kWorkersSucceeded:
        registry_->WorkersSucceeded(node_id_, msg.workers_succeeded().round());
        break;
      case v1::AgentMessage::kWorkersStopped:
        registry_->WorkersStopped(node_id_, msg.workers_stopped().round(),
                                  msg.workers_stopped().store_port());
        break;
      case v1::AgentMessage::kWorkersStarted:
        registry_->WorkersStarted(node_id_, msg.workers_started().round(),
                                  FromProto(msg.workers_started()));
        break;
      case v1::AgentMessage::kWorkerEnded:
        registry_->WorkerEnded(node_id_, msg.worker_ended().round(), FromProto(msg.worker_ended()));
        break;
      case v1::AgentMessage::kStacks: {
        std::vector<RankStack> ranks;
        for (const v1::RankStack& r : msg.stacks().ranks()) ranks.push_back(FromProto(r));
        stacks_->Deliver(node_id_, msg.stacks().id(), std::move(ranks));
        break;
      }
      case v1::AgentMessage::kStalled: {
        Stall stall{.stalled = msg.stalled().stalled(), .restartable = msg.stalled().restartable()};
        for (const v1::RankStack& r : msg.stalled().ranks()) stall.ranks.push_back(FromProto(r));
        registry_->NodeStalled(node_id_, msg.stalled().round(), stall);
        break;
      }
      case v1::AgentMessage::kStragglerSample:
        registry_->NodeSampled(node_id_, msg.straggler_sample().round(),
                               FromProto(msg.straggler_sample()));
        break;
      case v1::AgentMessage::kPreempt:
        registry_->Preempt(node_id_, msg.preempt().reason());
        break;
      case v1::AgentMessage::kHealth:
        registry_->NodeHealth(node_id_, msg.health().excluded());
        break;
      case v1::AgentMessage::kTraces:
        registry_->StoreTraces(node_id_, FromProto(msg.traces()));
        break;
      case v1::AgentMessage::kLeave:
        ReportLost(absl::StrCat("left: ", msg.leave().why()));
        RequestFinish(grpc::Status::OK);
        return false;
      case v1::AgentMessage::kJoin:
        spdlog::warn("rendezvous: node {} sent Join twice; ignored", node_id_);
        break;
      default:
        break;  // a newer agent's message: ignore
    }
    return true;
  }

  void ReportLost(const std::string& why) {
    std::string node_id;
    {
      MutexLock lock(&mu_);
      if (lost_reported_ || node_id_.empty()) return;
      lost_reported_ = true;
      node_id = node_id_;
    }
    registry_->NodeLost(node_id, why);
  }

  void Close(const absl::Status& why) override { Refuse(why); }

  void Refuse(const absl::Status& error) {
    {
      MutexLock lock(&mu_);
      v1::Error* e = out_.emplace_back().mutable_error();
      e->set_code(ToWireCode(error.code()));
      e->set_message(std::string(error.message()));
    }
    Flush();
    RequestFinish(ToGrpcStatus(error));
  }

  // Ends the stream once the queued messages are written.
  void RequestFinish(grpc::Status status) {
    bool finish = false;
    grpc::Status final_status;
    {
      MutexLock lock(&mu_);
      if (finish_requested_) return;
      finish_requested_ = true;
      finish_status_ = std::move(status);
      if (!writing_) {
        finish = finish_called_ = true;
        final_status = finish_status_;
      }
    }
    if (!finish) return;
    TsanCallOut out(this);
    Finish(std::move(final_status));
  }

  JobRegistry* const registry_;
  StacksBroker* const stacks_;
  const std::string peer_;
  std::shared_ptr<AgentSession> self_;    // keeps the session alive until OnDone
  std::unique_ptr<v1::AgentMessage> in_;  // the read in flight; touched by read reactions only

  Mutex mu_;
  // Set once, under mu_, by the Join reaction; the reactions that follow read it unlocked
  // (gRPC runs one read reaction at a time, each after the previous).
  std::string node_id_;
  std::deque<v1::ServerMessage> out_ ABSL_GUARDED_BY(mu_);  // front is in flight while writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_reported_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string PeerHost(const std::string& peer) {
  // gRPC peers look like "ipv4:10.0.0.2:53412" or "ipv6:[fd00::2]:53412" (the brackets
  // may be percent-encoded as %5B/%5D).
  std::string p = peer;
  for (auto [from, to] : {std::pair<const char*, const char*>{"%5B", "["}, {"%5D", "]"}}) {
    for (size_t at; (at = p.find(from)) != std::string::npos;) p.replace(at, 3, to);
  }
  size_t colon = p.find(':');
  if (colon == std::string::npos) return p;
  std::string rest = p.substr(colon + 1);
  if (!rest.empty() && rest[0] == '[') return rest.substr(1, rest.find(']') - 1);
  return rest.substr(0, rest.rfind(':'));
}

SessionReactor* NewAgentSession(JobRegistry* registry, StacksBroker* stacks, std::string peer) {
  auto session = std::make_shared<AgentSession>(registry, stacks, std::move(peer));
  session->Begin(session);
  return session.get();
}

}  // namespace muster::rdzv::grpc_internal
