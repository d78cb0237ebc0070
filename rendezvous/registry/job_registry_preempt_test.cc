// JobRegistry::Preempt and ::Drain (docs/guides/preemption.md): the notice reaches every stream of
// the job, and `muster drain` finds its node by id or host, or says why not.
#include <memory>

#include "base/mutex.h"
#include "gtest/gtest.h"
#include "rendezvous/registry/job_registry.h"

namespace muster::rdzv {
namespace {

class NoticeStream : public NodeStream {
 public:
  void Enqueue(const Event& event) override { queued_.push_back(event); }
  void Flush() override {
    MutexLock lock(&mu_);
    for (Event& e : queued_) {
      if (e.kind == Event::Kind::kPreempt) notices_.push_back(std::move(e));
    }
    queued_.clear();
  }
  void Close(const absl::Status&) override {}
  std::vector<Event> notices() {
    MutexLock lock(&mu_);
    return notices_;
  }

 private:
  std::vector<Event> queued_;  // under the registry's mutex
  Mutex mu_;
  std::vector<Event> notices_;
};

NodeInfo PreemptNode(const std::string& id, const std::string& host) {
  return NodeInfo{.node_id = id, .host = host, .address = "10.0.0.1", .store_port = 100};
}

TEST(JobRegistryPreemptTest, DrainByIdOrHostTellsEveryNodeOnce) {
  JobRegistry registry("");
  JobSpec spec;
  spec.run_id = "r";
  spec.min_nodes = spec.max_nodes = 3;
  auto a = std::make_shared<NoticeStream>();
  auto b = std::make_shared<NoticeStream>();
  auto c = std::make_shared<NoticeStream>();
  // Before the round: nothing to preempt.
  ASSERT_TRUE(registry.Join(a, PreemptNode("a", "h1"), spec).ok());
  EXPECT_EQ(registry.Drain("r", "a", "", "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(registry.Join(b, PreemptNode("b", "h2"), spec).ok());
  ASSERT_TRUE(registry.Join(c, PreemptNode("c", "h2"), spec).ok());

  EXPECT_EQ(registry.Drain("nope", "a", "", "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Drain("r", "z", "", "x").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<NodeInfo> two = registry.Drain("r", "", "h2", "x");
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(two.status().message()).find("--node"), std::string::npos);

  absl::StatusOr<NodeInfo> drained = registry.Drain("r", "", "h1", "maintenance");
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->node_id, "a");
  for (const auto& s : {a, b, c}) {
    ASSERT_EQ(s->notices().size(), 1u);
    EXPECT_EQ(s->notices()[0].preempted_node, "a");
    EXPECT_EQ(s->notices()[0].text, "maintenance");
  }
  EXPECT_EQ(registry.Status("r")->phase, JobPhase::kPreempting);
  // The node's own notice (its SIGTERM) after the drain is no news.
  registry.Preempt("a", "agent received SIGTERM");
  EXPECT_EQ(b->notices().size(), 1u);
  // Another node's is.
  registry.Preempt("c", "agent received SIGTERM");
  EXPECT_EQ(b->notices().size(), 2u);
  EXPECT_EQ(registry.Status("r")->preempting.size(), 2u);
}

}  // namespace
}  // namespace muster::rdzv
