// Job::NodeSampled (job_round.cc): the participants' straggler samples judged together
// (straggler.h); every participant hears the rank named, the status shows it, and a new round
// starts a new tally.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/core/job.h"
#include "rendezvous/core/job_harness.h"
#include "rendezvous/core/job_status.h"

namespace muster::rdzv {
namespace {

constexpr char kAllReduce[] = "all_reduce <- c10d_logger.py:81 wrapper <- train.py:57 step";
constexpr char kCompute[] = "compute <- train.py:12 step";

// Node "1" holds ranks 0-1, node "2" ranks 2-3 (2 local ranks each); rank 3 computes.
StragglerSample SampleOf(const std::string& node) {
  const int base = node == "1" ? 0 : 2;
  StragglerSample s{.window = 2, .share = 0.5};
  for (int local = 0; local < 2; ++local) {
    const int rank = base + local;
    s.ranks.push_back(
        RankStack{.rank = rank, .local_rank = local, .text = rank == 3 ? kCompute : kAllReduce});
  }
  return s;
}

TEST(JobStragglerTest, EveryParticipantHearsTheRankNamedAndTheStatusShowsIt) {
  JobHarness h(Spec(2, 2, /*restarts=*/1));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  h.Take("1");
  h.Take("2");
  std::vector<Event> out;
  // A stale round is ignored; one node's samples alone make no job-wide sample.
  h.job().NodeSampled("1", h.job().round() - 1, SampleOf("1"), h.now(), &out);
  for (int i = 0; i < 3; ++i)
    h.job().NodeSampled("1", h.job().round(), SampleOf("1"), h.now(), &out);
  EXPECT_TRUE(out.empty());
  // Window 2: named at the second job-wide sample (a whole window, 100 % >= 50 %).
  h.job().NodeSampled("2", h.job().round(), SampleOf("2"), h.now(), &out);
  EXPECT_TRUE(out.empty());
  h.job().NodeSampled("1", h.job().round(), SampleOf("1"), h.now(), &out);
  h.job().NodeSampled("2", h.job().round(), SampleOf("2"), h.now(), &out);
  ASSERT_EQ(out.size(), 2u);
  for (const Event& e : out) {
    EXPECT_EQ(e.kind, Event::Kind::kStraggler);
    EXPECT_EQ(e.straggler.rank, 3);
    EXPECT_EQ(e.straggler.node_id, "2");
    EXPECT_EQ(e.straggler.host, "host-2");
    EXPECT_EQ(e.straggler.stack, kCompute);
    EXPECT_EQ(e.text, e.straggler.line);
  }
  EXPECT_EQ(out[0].node_id, "1");
  EXPECT_EQ(out[1].node_id, "2");
  JobStatusSnapshot s = JobStatusOf(h.job());
  ASSERT_TRUE(s.straggler.has_value());
  EXPECT_EQ(s.straggler->rank, 3);

  // A new round: a new tally, nobody named.
  h.Fail("1", 1, /*restartable=*/true);
  h.StopAll();
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  EXPECT_EQ(h.job().round(), 2);
  EXPECT_FALSE(JobStatusOf(h.job()).straggler.has_value());
}

}  // namespace
}  // namespace muster::rdzv
