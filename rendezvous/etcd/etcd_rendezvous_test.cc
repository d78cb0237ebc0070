// EtcdRendezvousClient against a real etcd (etcd_test_server.h). The coordinator is played
// by the test: the keys a coordinator puts (docs/guides/etcd.md "Keys and leases"), with the
// values the backend's own conversions make, on its own lease.
#include "rendezvous/etcd/etcd_rendezvous.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/event_loop.h"
#include "gtest/gtest.h"
#include "muster/v1/etcd.pb.h"
#include "rendezvous/etcd/etcd_test_server.h"
#include "rendezvous/wire/proto_convert.h"

namespace muster::rdzv::etcd {
namespace {

const JobSpec kSpec{.run_id = "outcome",
                    .min_nodes = 2,
                    .max_nodes = 3,
                    .join_timeout = absl::Seconds(60),
                    .last_call_timeout = absl::Seconds(2),
                    .heartbeat_interval = absl::Seconds(1),
                    .heartbeat_misses = 2};
const std::string kJob = "/muster/outcome/";
const NodeInfo kCoordinator{.node_id = "x:1:aa", .host = "x", .address = "127.0.0.1"};
const NodeInfo kSelf{.node_id = "d:2:bb", .host = "d", .address = "127.0.0.1"};

// The job succeeded and its coordinator left at once, its keys with its lease (an agent
// exits as soon as it knows the outcome). The node must end with the job's success, not
// take the departure for a lost coordinator, elect itself and gather a new round alone
// (CI, once: one agent of tests/integration/test_etcd.py's coordinator test waited the join
// timeout and exited 138).
class EtcdRendezvousTest : public EtcdServerTest {
 protected:
  // The coordinator's node key and coordinator key on its lease, and the job's state: it
  // finished (Coordinator::PersistState), under the job's lease.
  void PutCoordinator() {
    absl::StatusOr<int64_t> lease = etcd_->GrantLease(absl::Seconds(30));
    ASSERT_TRUE(lease.ok()) << lease.status();
    lease_ = *lease;
    v1::EtcdNode node;
    wire::ToProto(kCoordinator, kSpec, node.mutable_join());
    ASSERT_TRUE(
        etcd_->Put(kJob + "nodes/" + kCoordinator.node_id, node.SerializeAsString(), lease_).ok());
    ASSERT_TRUE(etcd_->Put(kJob + "coordinator", kCoordinator.node_id, lease_).ok());
    absl::StatusOr<int64_t> job_lease = etcd_->GrantLease(absl::Seconds(30));
    ASSERT_TRUE(job_lease.ok()) << job_lease.status();
    v1::EtcdJobState state;
    state.set_round(3);
    state.set_job_lease(*job_lease);
    state.set_finished(true);
    state.add_participants(kCoordinator.node_id);
    state.add_participants(kSelf.node_id);
    ASSERT_TRUE(etcd_->Put(kJob + "job", state.SerializeAsString(), *job_lease).ok());
  }

  // Publishes batch `seq` of the coordinator to this node (Coordinator::Publish); the
  // store's revision after it.
  int64_t Publish(int64_t seq, const Event& event) {
    v1::EtcdEvents batch;
    batch.set_coordinator(kCoordinator.node_id);
    batch.set_seq(seq);
    v1::EtcdEvents::Addressed* addressed = batch.add_events();
    addressed->set_node_id(kSelf.node_id);
    wire::ToProto(event, addressed->mutable_message());
    absl::StatusOr<int64_t> put =
        etcd_->Put(kJob + "to/" + kSelf.node_id, batch.SerializeAsString(), lease_);
    EXPECT_TRUE(put.ok()) << put.status();
    return put.ok() ? *put : 0;
  }

  static Event Succeeded() {
    return Event{.kind = Event::Kind::kFinished,
                 .node_id = kSelf.node_id,
                 .text = "job succeeded",
                 .outcome = {.exit_code = 0, .reason = "job succeeded"}};
  }

  // Starts this node's client and waits until its node key is put after `after`.
  void Join(int64_t after) {
    absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
    absl::StatusOr<std::unique_ptr<EtcdRendezvousClient>> client = EtcdRendezvousClient::Create(
        {.endpoints = {Endpoint()}, .loop = loop_.get(), .join_timeout = kSpec.join_timeout});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    client_->Start(
        kSelf, kSpec, [this](const Event& e) { events_.push_back(e); },
        [this](const RendezvousError& e) { error_ = e; });
    WaitForPut(kJob + "nodes/" + kSelf.node_id, after);
  }

  // Waits (an etcd watch from `after` + 1, up to 20 s) for a put of `key`.
  void WaitForPut(const std::string& key, int64_t after) {
    std::unique_ptr<EtcdWatch> watch = etcd_->Watch(key, after + 1, {.prefix = false});
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    for (;;) {
      ASSERT_LT(absl::Now(), deadline) << "no put of " << key;
      std::vector<WatchEvent> events;
      ASSERT_TRUE(watch->Next(&events, deadline - absl::Now()).ok()) << "watching " << key;
      for (const WatchEvent& e : events) {
        if (!e.deleted) return;
      }
    }
  }

  // Runs the loop until an event of `kind` came (or an error), up to `timeout`.
  const Event* RunUntil(Event::Kind kind, absl::Duration timeout) {
    auto found = [&]() -> const Event* {
      for (const Event& e : events_) {
        if (e.kind == kind) return &e;
      }
      return nullptr;
    };
    const absl::Time deadline = EventLoop::Now() + timeout;
    while (found() == nullptr && !error_ && EventLoop::Now() < deadline) {
      EXPECT_TRUE(loop_->RunOnce(deadline - EventLoop::Now()).ok());
    }
    return found();
  }

  // The coordinator leaves (its keys go); the node ends with the success and takes over
  // nothing: no coordinator key of its own, no round gathered.
  void ExpectTheSuccessOnceTheCoordinatorLeft() {
    ASSERT_TRUE(etcd_->RevokeLease(lease_).ok());
    const Event* ended = RunUntil(Event::Kind::kFinished, absl::Seconds(10));
    ASSERT_FALSE(error_.has_value()) << error_->status;
    ASSERT_NE(ended, nullptr) << "the job's success never reached the node";
    EXPECT_EQ(ended->outcome.exit_code, 0);
    absl::StatusOr<RangeResult> named = etcd_->Get(kJob + "coordinator");
    ASSERT_TRUE(named.ok()) << named.status();
    EXPECT_TRUE(named->kvs.empty()) << "coordinator: " << named->kvs[0].value;
    for (const Event& e : events_) {
      EXPECT_TRUE(e.kind == Event::Kind::kFinished || e.kind == Event::Kind::kProgress) << e.text;
    }
  }

  void TearDown() override {
    client_.reset();  // on the loop's thread, as the agent does
    loop_.reset();
    EtcdServerTest::TearDown();
  }

  int64_t lease_ = 0;  // the coordinator's
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<EtcdRendezvousClient> client_;
  std::vector<Event> events_;
  std::optional<RendezvousError> error_;
};

// The outcome's batch reaches the agent only after the coordinator's key went: made certain
// by putting it before the agent's watches begin (its join), so that no watch delivers it.
// The node has no batch of the coordinator yet: it reads its events key as it was before
// the deletion.
TEST_F(EtcdRendezvousTest, AnOutcomePutBeforeTheCoordinatorLeftIsNotLostToTheElection) {
  PutCoordinator();
  ASSERT_FALSE(HasFatalFailure());
  const int64_t before = Publish(1, Succeeded());
  Join(before);
  ASSERT_FALSE(HasFatalFailure());
  ExpectTheSuccessOnceTheCoordinatorLeft();
}

// The usual order: a first batch (the node waits), then the outcome and the coordinator's
// leaving at once. Its events key goes with the coordinator's lease, so the node's own
// watch brings the outcome before that deletion, whichever watch the brain hears first.
TEST_F(EtcdRendezvousTest, AnOutcomeJustBeforeTheCoordinatorLeftEndsTheNode) {
  PutCoordinator();
  ASSERT_FALSE(HasFatalFailure());
  absl::StatusOr<RangeResult> now = etcd_->Get(kJob + "job");
  ASSERT_TRUE(now.ok()) << now.status();
  Join(now->revision);
  ASSERT_FALSE(HasFatalFailure());
  Publish(1, Event{.kind = Event::Kind::kProgress, .node_id = kSelf.node_id, .text = "waiting"});
  ASSERT_NE(RunUntil(Event::Kind::kProgress, absl::Seconds(10)), nullptr);
  Publish(2, Succeeded());
  ExpectTheSuccessOnceTheCoordinatorLeft();
}

}  // namespace
}  // namespace muster::rdzv::etcd
