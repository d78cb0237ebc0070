#include "rendezvous/grpc/test_agent.h"

#include <future>

#include "absl/strings/str_cat.h"

namespace muster::rdzv {

TestAgent::TestAgent(GrpcRendezvousClient::Options options) {
  loop_ = EventLoop::Create().value();
  options.loop = loop_.get();
  client_ = GrpcRendezvousClient::Create(options).value();
  thread_ = std::thread([this] {
    while (!stop_) loop_->RunOnce(absl::Milliseconds(50)).IgnoreError();
  });
}

TestAgent::~TestAgent() {
  DestroyClient();
  stop_ = true;
  thread_.join();
}

void TestAgent::Call(const std::function<void(GrpcRendezvousClient&)>& fn) {
  std::promise<void> done;
  loop_->Post([&] {
    if (client_ != nullptr) fn(*client_);
    done.set_value();
  });
  done.get_future().wait();
}

void TestAgent::Start(const NodeInfo& node, const JobSpec& spec) {
  Call([&](GrpcRendezvousClient& c) {
    c.Start(
        node, spec, [this](const Event& e) { OnEvent(e); },
        [this](const RendezvousError& e) { OnError(e.status); });
  });
}

void TestAgent::DestroyClient() {
  std::promise<void> done;
  loop_->Post([&] {
    client_.reset();
    done.set_value();
  });
  done.get_future().wait();
}

void TestAgent::OnEvent(const Event& event) {
  MutexLock lock(&mu_);
  events_.push_back(event);
  cv_.SignalAll();
}

void TestAgent::OnError(const absl::Status& error) {
  MutexLock lock(&mu_);
  errors_.push_back(error);
  cv_.SignalAll();
}

std::optional<Event> TestAgent::WaitEvent(Event::Kind kind, absl::Duration timeout) {
  MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + timeout;
  for (bool expired = false;; expired = cv_.WaitWithDeadline(&mu_, deadline)) {
    for (size_t i = taken_[kind]; i < events_.size(); ++i) {
      if (events_[i].kind == kind) {
        taken_[kind] = i + 1;
        return events_[i];
      }
    }
    if (expired) return std::nullopt;
  }
}

std::optional<absl::Status> TestAgent::WaitError(absl::Duration timeout) {
  MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + timeout;
  while (errors_.empty()) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  if (errors_.empty()) return std::nullopt;
  return errors_.front();
}

int TestAgent::errors_seen() const {
  MutexLock lock(&mu_);
  return static_cast<int>(errors_.size());
}

NodeInfo TestNode(const std::string& name, int store_port, int rank_hint, int local_world_size) {
  NodeInfo n;
  n.node_id = absl::StrCat(name, ":", store_port);
  n.host = name;
  n.address = absl::StrCat("10.0.0.", store_port % 250);
  n.rank_hint = rank_hint;
  n.local_world_size = local_world_size;
  n.store_port = store_port;
  n.wants_node_list = true;
  return n;
}

}  // namespace muster::rdzv
