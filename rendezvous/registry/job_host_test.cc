#include "rendezvous/registry/job_host.h"

#include <vector>

#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

// What a backend would send: each delivery's events, and the rounds started.
class RecordingTransport : public JobHost::Transport {
 public:
  void Deliver(std::vector<Event> events, absl::Time now) override {
    deliveries.push_back(std::move(events));
    times.push_back(now);
  }
  void RoundStarted(absl::Duration formed_in) override { rounds.push_back(formed_in); }

  std::vector<std::vector<Event>> deliveries;
  std::vector<absl::Time> times;
  std::vector<absl::Duration> rounds;
};

NodeInfo HostNode(const std::string& id) {
  return NodeInfo{
      .node_id = id, .host = "host-" + id, .address = "10.0.0.1", .local_world_size = 1};
}

JobSpec HostSpec(int min, int max) {
  JobSpec s;
  s.run_id = "job";
  s.min_nodes = min;
  s.max_nodes = max;
  return s;
}

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(JobHostTest, EachCallDeliversItsEventsAndARoundIsObservedOnce) {
  RecordingTransport transport;
  JobHost host(HostSpec(2, 2), kT0, &transport, {.backend = "test"});
  ASSERT_TRUE(host.Join(HostNode("a"), HostSpec(2, 2), kT0).ok());
  ASSERT_EQ(transport.deliveries.size(), 1u);
  EXPECT_TRUE(transport.rounds.empty());
  ASSERT_TRUE(host.Join(HostNode("b"), HostSpec(2, 2), kT0 + absl::Seconds(1)).ok());
  ASSERT_EQ(transport.deliveries.size(), 2u);
  EXPECT_EQ(transport.times.back(), kT0 + absl::Seconds(1));
  // At max nodes the round starts at once: one RoundStarted per node, in one delivery.
  int started = 0;
  for (const Event& e : transport.deliveries.back()) {
    started += e.kind == Event::Kind::kRoundStarted;
  }
  EXPECT_EQ(started, 2);
  ASSERT_EQ(transport.rounds.size(), 1u);
  EXPECT_EQ(transport.rounds[0], absl::Seconds(1));
  EXPECT_EQ(host.job().round(), 1);

  // Status only: nothing to deliver.
  host.Heartbeat("a", kT0 + absl::Seconds(2));
  EXPECT_EQ(transport.deliveries.size(), 2u);
  // A change without events is delivered all the same (a backend that keeps state saves it).
  host.WorkersStarted("a", 1, {}, kT0 + absl::Seconds(2));
  ASSERT_EQ(transport.deliveries.size(), 3u);
  EXPECT_TRUE(transport.deliveries.back().empty());
}

TEST(JobHostTest, RefusalsDeliverNothing) {
  RecordingTransport transport;
  JobHost host(HostSpec(2, 2), kT0, &transport, {.backend = "test", .name_job = true});
  JobSpec other = HostSpec(2, 2);
  other.max_restarts = 5;
  EXPECT_EQ(host.Join(HostNode("a"), other, kT0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(host.Drain("nobody", "", "maintenance", kT0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(transport.deliveries.empty());
}

TEST(JobHostTest, TheTimerTicksWhenDueAndNeverSpins) {
  RecordingTransport transport;
  JobSpec spec = HostSpec(1, 2);
  JobHost host(spec, kT0, &transport, {.backend = "test"});
  ASSERT_TRUE(host.Join(HostNode("a"), spec, kT0).ok());
  std::optional<absl::Time> due = host.NextDeadline();
  ASSERT_TRUE(due.has_value());  // the last call (min nodes reached)
  std::optional<absl::Time> wake;
  const size_t before = transport.deliveries.size();
  EXPECT_FALSE(host.TickIfDue(*due - absl::Milliseconds(1), &wake));
  EXPECT_EQ(wake, due);
  EXPECT_EQ(transport.deliveries.size(), before);
  EXPECT_TRUE(host.TickIfDue(*due, &wake));
  EXPECT_EQ(transport.deliveries.size(), before + 1);
  // Whatever the next deadline, the timer looks again no sooner than kMinTimerSleep.
  if (wake) {
    EXPECT_GE(*wake, *due + JobHost::kMinTimerSleep);
  }
  // Deadline by deadline, the last call ends and the round starts with the one node.
  for (int i = 0; i < 20 && host.job().round() == 0 && wake; ++i) host.TickIfDue(*wake, &wake);
  EXPECT_EQ(host.job().round(), 1);
  EXPECT_EQ(transport.rounds.size(), 1u);
}

}  // namespace
}  // namespace muster::rdzv
