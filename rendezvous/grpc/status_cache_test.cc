#include "rendezvous/grpc/status_cache.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "muster/v1/rendezvous.pb.h"

namespace muster::rdzv::grpc_internal {
namespace {

class NullStream : public NodeStream {
 public:
  void Enqueue(const Event&) override {}
  void Flush() override {}
  void Close(const absl::Status&) override {}
};

v1::JobStatusReply Parse(const grpc::Slice& bytes) {
  v1::JobStatusReply reply;
  EXPECT_TRUE(reply.ParseFromArray(bytes.begin(), static_cast<int>(bytes.size())));
  return reply;
}

TEST(StatusCacheTest, RebuildsOnChangesAndAgeButNotOnHeartbeats) {
  JobRegistry registry("");
  NodeInfo node;
  node.node_id = "a";
  node.host = "host-a";
  node.address = "10.0.0.1";
  JobSpec spec;
  spec.run_id = "r";
  ASSERT_TRUE(registry.Join(std::make_shared<NullStream>(), node, spec).ok());
  StatusCache cache(&registry, absl::Seconds(1));
  const absl::Time t0 = absl::Now();

  grpc::Slice first = cache.Reply("r", t0).value();
  EXPECT_EQ(cache.builds(), 1);
  v1::JobStatusReply reply = Parse(first);
  EXPECT_EQ(reply.phase(), v1::JOB_PHASE_RUNNING);
  ASSERT_EQ(reply.workers_size(), 1);
  EXPECT_EQ(reply.workers(0).pid(), 0);
  EXPECT_EQ(reply.conditions_size(), 5);

  registry.Heartbeat("a");
  grpc::Slice again = cache.Reply("r", t0 + absl::Milliseconds(500)).value();
  EXPECT_EQ(cache.builds(), 1);
  EXPECT_EQ(again.begin(), first.begin());  // the same bytes, shared

  registry.WorkersStarted("a", 1, {{.local_rank = 0, .rank = 0, .pid = 4242}});
  reply = Parse(cache.Reply("r", t0 + absl::Milliseconds(600)).value());
  EXPECT_EQ(cache.builds(), 2);
  EXPECT_EQ(reply.workers(0).pid(), 4242);
  EXPECT_EQ(reply.workers(0).state(), v1::WORKER_STATE_RUNNING);

  cache.Reply("r", t0 + absl::Milliseconds(1500)).value();  // built at 600 ms: still fresh
  EXPECT_EQ(cache.builds(), 2);
  cache.Reply("r", t0 + absl::Milliseconds(1700)).value();  // older than 1 s: heartbeat times
  EXPECT_EQ(cache.builds(), 3);

  EXPECT_TRUE(absl::IsNotFound(cache.Reply("other", t0).status()));
}

}  // namespace
}  // namespace muster::rdzv::grpc_internal
