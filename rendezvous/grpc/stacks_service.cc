#include "rendezvous/grpc/stacks_service.h"

#include <grpcpp/support/server_callback.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/thread_set.h"
#include "base/tsan.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/wire/stacks_convert.h"
#include "rendezvous/wire/status_convert.h"

namespace muster::rdzv::grpc_internal {

using wire::ToGrpcStatus;
namespace {

constexpr absl::Duration kDefaultTimeout = absl::Milliseconds(1500);
constexpr absl::Duration kMaxTimeout = absl::Seconds(60);

// The agents get most of the call's time, the rest carries their answers back.
absl::Duration AgentTimeout(absl::Duration call) { return call * 4 / 5; }

class StacksService final : public v1::Stacks::CallbackService {
 public:
  StacksService(JobRegistry* registry, StacksBroker* broker, std::string token)
      : registry_(registry), broker_(broker), token_(std::move(token)) {}

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                const v1::GetStacksRequest* request,
                                v1::StacksReply* reply) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    absl::Status allowed = CheckBearerToken(*context, token_);
    absl::StatusOr<std::vector<StacksTarget>> targets =
        allowed.ok() ? registry_->StacksTargets(request->run_id())
                     : absl::StatusOr<std::vector<StacksTarget>>(allowed);
    if (!targets.ok()) {
      TsanCallOut out(reactor);
      reactor->Finish(ToGrpcStatus(targets.status()));
      return reactor;
    }
    absl::Duration timeout = request->timeout_ms() > 0
                                 ? std::min(absl::Milliseconds(request->timeout_ms()), kMaxTimeout)
                                 : kDefaultTimeout;
    absl::Time deadline = absl::Now() + timeout;
    std::vector<std::string> ids;
    for (const StacksTarget& t : *targets) ids.push_back(t.node_id);
    int64_t id = broker_->Open(ids);
    for (const StacksTarget& t : *targets) t.stream->RequestStacks(id, AgentTimeout(timeout));
    reply->set_run_id(request->run_id());
    waiters_.Start([this, reactor, reply, id, deadline, targets = *std::move(targets)] {
      std::map<std::string, std::vector<RankStack>> answers = broker_->Wait(id, deadline);
      for (const StacksTarget& t : targets) {
        NodeStacks node{.node_id = t.node_id, .host = t.host, .group_rank = t.group_rank};
        auto it = answers.find(t.node_id);
        if (it == answers.end()) {
          node.unavailable = "the agent did not answer in time";
        } else {
          node.ranks = std::move(it->second);
        }
        wire::ToProto(node, reply->add_nodes());  // qualified: unity builds
      }
      TsanCallOut out(reactor);
      reactor->Finish(grpc::Status::OK);
    });
    return reactor;
  }

 private:
  JobRegistry* const registry_;
  StacksBroker* const broker_;
  const std::string token_;
  ThreadSet waiters_;  // one per call in flight; joined at destruction
};

}  // namespace

std::unique_ptr<grpc::Service> NewStacksService(JobRegistry* registry, StacksBroker* broker,
                                                std::string token) {
  return std::make_unique<StacksService>(registry, broker, std::move(token));
}

}  // namespace muster::rdzv::grpc_internal
