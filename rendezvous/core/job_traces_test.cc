// Job::TracesStored (docs/guides/collective-traces.md): every node of the failed round hears what
// the server stored so far, counts add up per round, and a second report of a node is no news.
#include "gtest/gtest.h"
#include "rendezvous/core/job_harness.h"
#include "rendezvous/core/job_status.h"

namespace muster::rdzv {
namespace {

TraceNode Files(std::vector<std::string> files) {
  return TraceNode{.files = std::move(files), .bytes = 10};
}

TEST(JobTracesTest, TheUploaderHearsWhatIsStoredSoFarAndEveryNodeOnceAllReported) {
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  ASSERT_EQ(h.job().phase(), Job::Phase::kRunning);
  h.Fail("2", 1, /*restartable=*/false);  // finished: no restart budget
  h.Take("1");
  h.Take("2");
  const std::string where = "server:/logs/traces/round1/";
  std::vector<Event> out;
  h.job().TracesStored("2", 1, where, Files({"n2/flight_recorder_rank_2", "n2/fr_3"}), "", h.now(),
                       &out);
  ASSERT_EQ(out.size(), 1u);  // the uploader only, until every node has reported
  EXPECT_EQ(out[0].node_id, "2");
  for (const Event& e : out) {
    EXPECT_EQ(e.kind, Event::Kind::kTraces);
    EXPECT_EQ(e.traces.round, 1);
    EXPECT_EQ(e.traces.location, where);
    EXPECT_EQ(e.traces.nodes, 1);
    EXPECT_EQ(e.traces.files, 2);
    EXPECT_EQ(e.traces.nodes_reported, 1);
    EXPECT_EQ(e.traces.nodes_expected, 2);
  }
  out.clear();
  h.job().TracesStored("1", 1, where, Files({"n1/fr_0", "n1/fr_1"}), "", h.now(), &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].traces.nodes, 2);
  EXPECT_EQ(out[0].traces.files, 4);
  EXPECT_EQ(out[0].traces.nodes_reported, 2);
  out.clear();
  h.job().TracesStored("1", 1, where, Files({"again"}), "", h.now(), &out);
  EXPECT_TRUE(out.empty());
  JobStatusSnapshot s = JobStatusOf(h.job());
  ASSERT_EQ(s.traces.size(), 1u);
  EXPECT_EQ(s.traces[0].location, where);
  ASSERT_EQ(s.traces[0].nodes.size(), 2u);
  EXPECT_EQ(s.traces[0].nodes[0].host, "host-2");
}

TEST(JobTracesTest, ANodeWithoutFilesCountsAsReportedAndTheErrorGoesToTheUploaderOnly) {
  JobHarness h(Spec(2, 2));
  ASSERT_TRUE(h.Join("1").ok());
  ASSERT_TRUE(h.Join("2").ok());
  h.Fail("1", 1, false);
  std::vector<Event> out;
  h.job().TracesStored("1", 1, "s:/t/round1/", TraceNode{}, "no log dir", h.now(), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].traces.nodes, 0);
  EXPECT_EQ(out[0].traces.nodes_reported, 1);
  EXPECT_EQ(out[0].traces.error, "no log dir");
  out.clear();
  h.job().TracesStored("2", 1, "s:/t/round1/", TraceNode{}, "no log dir", h.now(), &out);
  ASSERT_EQ(out.size(), 2u);  // complete: both hear it, the error goes to the uploader only
  for (const Event& e : out) {
    EXPECT_EQ(e.traces.nodes_reported, 2);
    EXPECT_EQ(e.traces.error, e.node_id == "2" ? "no log dir" : "");
  }
  EXPECT_TRUE(JobStatusOf(h.job()).traces[0].nodes.empty());
}

TEST(JobTracesTest, KeepsTheLastRoundsOnlyAndIgnoresFutureRounds) {
  JobHarness h(Spec(1, 1, 100));
  ASSERT_TRUE(h.Join("1").ok());
  std::vector<Event> out;
  h.job().TracesStored("1", 5, "s:/x/", Files({"f"}), "", h.now(), &out);
  EXPECT_TRUE(out.empty());  // round 5 has not run
  for (size_t i = 0; i < Job::kMaxTraceRounds + 3; ++i) {
    h.job().TracesStored("1", h.job().round(), "s:/x/", Files({"f"}), "", h.now(), &out);
    h.Fail("1", 137, true);
    h.StopAll();
  }
  const std::vector<TraceRound>& kept = h.job().traces();
  ASSERT_EQ(kept.size(), Job::kMaxTraceRounds);
  EXPECT_EQ(kept.back().round, static_cast<int>(Job::kMaxTraceRounds) + 3);
  out.clear();
  h.job().TracesStored("1", 1, "s:/x/", Files({"f"}), "", h.now(), &out);
  EXPECT_TRUE(out.empty());  // older than the rounds kept
}

}  // namespace
}  // namespace muster::rdzv
