// EtcdRendezvousClient against a real etcd (etcd_test_server.h). The lost coordinator is
// played by the test: the keys a coordinator puts (docs/guides/etcd.md "Keys and leases"),
// with the values the backend's own conversions make, on its own lease.
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

class EtcdRendezvousTest : public EtcdServerTest {
 protected:
  // Runs `loop` until `done` or `timeout` passes.
  static void RunUntil(EventLoop& loop, absl::Duration timeout, const std::function<bool()>& done) {
    const absl::Time deadline = EventLoop::Now() + timeout;
    while (!done() && EventLoop::Now() < deadline) {
      ASSERT_TRUE(loop.RunOnce(deadline - EventLoop::Now()).ok());
    }
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
};

// The job succeeded and its coordinator left at once, its keys with its lease. This node's
// events key and the coordinator's node key are watched by two threads, so the batch with
// the outcome can reach the agent after the deletion: that order is made certain here by
// putting the batch before the agent's watches begin (at its join), so that no watch
// delivers it. The node must still end with the job's success, not take the departure for
// a lost coordinator, elect itself and gather a new round alone (CI, once: one agent of
// tests/integration/test_etcd.py's coordinator test waited the join timeout and exited 138).
TEST_F(EtcdRendezvousTest, AnOutcomePutBeforeTheCoordinatorLeftIsNotLostToTheElection) {
  const JobSpec spec{.run_id = "outcome",
                     .min_nodes = 2,
                     .max_nodes = 3,
                     .join_timeout = absl::Seconds(60),
                     .last_call_timeout = absl::Seconds(2),
                     .heartbeat_interval = absl::Seconds(1),
                     .heartbeat_misses = 2};
  const std::string job = "/muster/outcome/";
  const NodeInfo coordinator{.node_id = "x:1:aa", .host = "x", .address = "127.0.0.1"};
  const NodeInfo self{.node_id = "d:2:bb", .host = "d", .address = "127.0.0.1"};
  absl::StatusOr<int64_t> lease = etcd_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  v1::EtcdNode node;
  wire::ToProto(coordinator, spec, node.mutable_join());
  ASSERT_TRUE(
      etcd_->Put(job + "nodes/" + coordinator.node_id, node.SerializeAsString(), *lease).ok());
  ASSERT_TRUE(etcd_->Put(job + "coordinator", coordinator.node_id, *lease).ok());
  // The job's state says it finished (Coordinator::PersistState), under the job's lease.
  absl::StatusOr<int64_t> job_lease = etcd_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(job_lease.ok()) << job_lease.status();
  v1::EtcdJobState state;
  state.set_round(3);
  state.set_job_lease(*job_lease);
  state.set_finished(true);
  state.add_participants(coordinator.node_id);
  state.add_participants(self.node_id);
  ASSERT_TRUE(etcd_->Put(job + "job", state.SerializeAsString(), *job_lease).ok());
  // The coordinator's last batch for this node: the job's success (Coordinator::Publish).
  Event finished{.kind = Event::Kind::kFinished,
                 .node_id = self.node_id,
                 .text = "job succeeded",
                 .outcome = {.exit_code = 0, .reason = "job succeeded"}};
  v1::EtcdEvents batch;
  batch.set_coordinator(coordinator.node_id);
  batch.set_seq(1);
  v1::EtcdEvents::Addressed* addressed = batch.add_events();
  addressed->set_node_id(self.node_id);
  wire::ToProto(finished, addressed->mutable_message());
  absl::StatusOr<int64_t> before =
      etcd_->Put(job + "to/" + self.node_id, batch.SerializeAsString(), *lease);
  ASSERT_TRUE(before.ok()) << before.status();

  absl::StatusOr<std::unique_ptr<EventLoop>> loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok()) << loop.status();
  absl::StatusOr<std::unique_ptr<EtcdRendezvousClient>> client = EtcdRendezvousClient::Create(
      {.endpoints = {Endpoint()}, .loop = loop->get(), .join_timeout = spec.join_timeout});
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<Event> events;
  std::optional<RendezvousError> error;
  (*client)->Start(
      self, spec, [&](const Event& e) { events.push_back(e); },
      [&](const RendezvousError& e) { error = e; });
  // Joined: its node key is ready for the coordinator, its watches begin after the batch.
  WaitForPut(job + "nodes/" + self.node_id, *before);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(etcd_->RevokeLease(*lease).ok());  // the coordinator leaves; its keys go

  auto outcome = [&]() -> const Event* {
    for (const Event& e : events) {
      if (e.kind == Event::Kind::kFinished) return &e;
    }
    return nullptr;
  };
  RunUntil(**loop, absl::Seconds(10), [&] { return outcome() != nullptr || error.has_value(); });
  ASSERT_FALSE(error.has_value()) << error->status;
  const Event* ended = outcome();
  ASSERT_NE(ended, nullptr) << "the job's success never reached the node (" << events.size()
                            << " other events)";
  EXPECT_EQ(ended->outcome.exit_code, 0);
  // Nor did it take over the finished job: it names no coordinator, gathers no round.
  absl::StatusOr<RangeResult> named = etcd_->Get(job + "coordinator");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_TRUE(named->kvs.empty()) << "coordinator: " << named->kvs[0].value;
  for (const Event& e : events) EXPECT_EQ(e.kind, Event::Kind::kFinished) << e.text;
  client->reset();  // on the loop's thread, as the agent does
}

}  // namespace
}  // namespace muster::rdzv::etcd
