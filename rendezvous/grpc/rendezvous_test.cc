// End to end over real gRPC: one RendezvousServer on port 0 and several
// GrpcRendezvousClients in this process, each on its own EventLoop thread.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "rendezvous/grpc/job_status_client.h"
#include "rendezvous/grpc/server.h"
#include "rendezvous/grpc/test_agent.h"

namespace muster::rdzv {
namespace {

using Kind = Event::Kind;

JobSpec Spec(int min_nodes, int max_nodes, int max_restarts = 3) {
  JobSpec spec;
  spec.run_id = "job-1";
  spec.min_nodes = min_nodes;
  spec.max_nodes = max_nodes;
  spec.max_restarts = max_restarts;
  spec.last_call_timeout = absl::Milliseconds(300);
  spec.join_timeout = absl::Seconds(20);
  spec.heartbeat_interval = absl::Milliseconds(200);
  return spec;
}

class RendezvousTest : public ::testing::Test {
 protected:
  void StartServer(RendezvousServer::Options options = {}) {
    options.listen_address = "127.0.0.1:0";
    server_ = RendezvousServer::Start(options).value();
    endpoint_ = {.host = "127.0.0.1", .port = server_->port()};
  }

  TestAgent& AddAgent(const std::string& token = "") {
    GrpcRendezvousClient::Options options;
    options.endpoint = endpoint_;
    options.token = token;
    options.join_timeout = absl::Seconds(5);
    agents_.push_back(std::make_unique<TestAgent>(options));
    return *agents_.back();
  }

  // Three agents with rank hints 0..2 and local world sizes 2, 1, 3, in round 1.
  std::vector<Assignment> FormThree(const JobSpec& spec) {
    const int local[] = {2, 1, 3};
    for (int i = 0; i < 3; ++i)
      AddAgent().Start(TestNode("n" + std::to_string(i), 1000 + i, i, local[i]), spec);
    std::vector<Assignment> out;
    for (auto& agent : agents_) {
      std::optional<Event> e = agent->WaitEvent(Kind::kRoundStarted);
      EXPECT_TRUE(e.has_value());
      out.push_back(e ? e->assignment : Assignment{});
    }
    return out;
  }

  JobStatusQuery Query(const std::string& run_id, const std::string& token = "") {
    JobStatusQuery query;
    query.endpoint = endpoint_;
    query.run_id = run_id;
    query.token = token;
    return query;
  }

  std::unique_ptr<RendezvousServer> server_;
  Endpoint endpoint_;
  std::vector<std::unique_ptr<TestAgent>> agents_;  // destroyed before the server
  void TearDown() override { agents_.clear(); }
};

TEST_F(RendezvousTest, ThreeNodesFormARound) {
  StartServer();
  std::vector<Assignment> a = FormThree(Spec(3, 3));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a[i].round, 1);
    EXPECT_EQ(a[i].restart_count, 0);
    EXPECT_EQ(a[i].group_rank, i);
    EXPECT_EQ(a[i].group_world_size, 3);
    EXPECT_EQ(a[i].world_size, 6);
    EXPECT_EQ(a[i].master_port, 1000);
    EXPECT_EQ(a[i].master_addr, TestNode("n0", 1000).address);
    ASSERT_EQ(a[i].nodes.size(), 3u);
    EXPECT_EQ(a[i].nodes[2].host, "n2");
  }
  EXPECT_EQ(a[0].rank_base, 0);
  EXPECT_EQ(a[1].rank_base, 2);
  EXPECT_EQ(a[2].rank_base, 3);
}

TEST_F(RendezvousTest, RestartableFailureStopsAllThenNextRound) {
  StartServer();
  FormThree(Spec(3, 3));
  Failure f;
  f.node_id = TestNode("n1", 1001).node_id;
  f.host = "n1";
  f.rank = 2;
  f.code = 137;
  f.what = "signal 9 (SIGKILL)";
  f.restartable = true;
  agents_[1]->Call([&](GrpcRendezvousClient& c) { c.ReportFailure(1, f); });
  for (auto& agent : agents_) ASSERT_TRUE(agent->WaitEvent(Kind::kStopWorkers).has_value());
  for (int i = 0; i < 3; ++i) {
    agents_[i]->Call([&](GrpcRendezvousClient& c) { c.ReportStopped(1, 2000 + i); });
  }
  for (auto& agent : agents_) {
    std::optional<Event> e = agent->WaitEvent(Kind::kRoundStarted);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->assignment.round, 2);
    EXPECT_EQ(e->assignment.restart_count, 1);
    EXPECT_EQ(e->assignment.master_port, 2000);
  }
  JobStatusSnapshot status = GetJobStatus(Query("job-1")).value();
  EXPECT_EQ(status.phase, JobPhase::kRunning);
  EXPECT_EQ(status.restarts_used, 1);
  ASSERT_EQ(status.history.size(), 1u);
  ASSERT_TRUE(status.history[0].failure.has_value());
  EXPECT_EQ(status.history[0].failure->code, 137);
}

TEST_F(RendezvousTest, LostClientRestartsElasticJob) {
  StartServer();
  FormThree(Spec(2, 3));
  agents_[2]->DestroyClient();
  for (int i = 0; i < 2; ++i) {
    std::optional<Event> e = agents_[i]->WaitEvent(Kind::kStopWorkers);
    ASSERT_TRUE(e.has_value());
    EXPECT_NE(e->text.find("lost"), std::string::npos) << e->text;
    agents_[i]->Call([&](GrpcRendezvousClient& c) { c.ReportStopped(1, 3000 + i); });
  }
  for (int i = 0; i < 2; ++i) {
    std::optional<Event> e = agents_[i]->WaitEvent(Kind::kRoundStarted);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->assignment.round, 2);
    EXPECT_EQ(e->assignment.restart_count, 0);  // membership changes are free
    EXPECT_EQ(e->assignment.group_world_size, 2);
  }
}

TEST_F(RendezvousTest, LostClientBelowMinimumFinishesWith138) {
  StartServer();
  FormThree(Spec(3, 3));
  agents_[0]->DestroyClient();
  for (int i = 1; i < 3; ++i) {
    std::optional<Event> e = agents_[i]->WaitEvent(Kind::kFinished);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->outcome.exit_code, 138);
  }
  JobStatusSnapshot status = GetJobStatus(Query("job-1")).value();
  EXPECT_EQ(status.phase, JobPhase::kFailed);
  ASSERT_TRUE(status.outcome.has_value());
  EXPECT_EQ(status.outcome->exit_code, 138);
}

TEST_F(RendezvousTest, MissingOrBadTokenIsUnauthenticated) {
  RendezvousServer::Options options;
  options.token = "s3cret";
  StartServer(options);
  TestAgent& none = AddAgent();
  TestAgent& bad = AddAgent("wrong");
  TestAgent& good = AddAgent("s3cret");
  none.Start(TestNode("a", 1), Spec(1, 1));
  bad.Start(TestNode("b", 2), Spec(1, 1));
  good.Start(TestNode("c", 3), Spec(1, 1));
  std::optional<absl::Status> e1 = none.WaitError();
  std::optional<absl::Status> e2 = bad.WaitError();
  ASSERT_TRUE(e1 && e2);
  EXPECT_TRUE(absl::IsUnauthenticated(*e1)) << *e1;
  EXPECT_NE(e1->message().find("none was sent"), absl::string_view::npos) << *e1;
  EXPECT_TRUE(absl::IsUnauthenticated(*e2)) << *e2;
  EXPECT_TRUE(good.WaitEvent(Kind::kRoundStarted).has_value());
  EXPECT_EQ(good.errors_seen(), 0);
  EXPECT_TRUE(absl::IsUnauthenticated(GetJobStatus(Query("job-1", "x")).status()));
  EXPECT_TRUE(GetJobStatus(Query("job-1", "s3cret")).ok());
}

TEST_F(RendezvousTest, WrongRunIdIsRefusedNamingBoth) {
  RendezvousServer::Options options;
  options.run_id = "job-1";
  StartServer(options);
  JobSpec spec = Spec(1, 1);
  spec.run_id = "job-2";
  TestAgent& agent = AddAgent();
  agent.Start(TestNode("a", 1), spec);
  std::optional<absl::Status> e = agent.WaitError();
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(*e)) << *e;
  EXPECT_NE(e->message().find("job-1"), absl::string_view::npos) << *e;
  EXPECT_NE(e->message().find("job-2"), absl::string_view::npos) << *e;
}

TEST_F(RendezvousTest, RankConflictIsRefusedNamingBothNodes) {
  StartServer();
  TestAgent& first = AddAgent();
  first.Start(TestNode("alpha", 1, /*rank_hint=*/0), Spec(2, 2));
  ASSERT_TRUE(first.WaitEvent(Kind::kProgress).has_value());
  TestAgent& second = AddAgent();
  second.Start(TestNode("beta", 2, /*rank_hint=*/0), Spec(2, 2));
  std::optional<absl::Status> e = second.WaitError();
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(*e)) << *e;
  EXPECT_NE(e->message().find("alpha"), absl::string_view::npos) << *e;
  EXPECT_NE(e->message().find("beta"), absl::string_view::npos) << *e;
  EXPECT_EQ(first.errors_seen(), 0);
}

TEST_F(RendezvousTest, JobStatusReflectsPhaseAndNodes) {
  StartServer();
  TestAgent& a = AddAgent();
  a.Start(TestNode("n0", 1000, 0), Spec(2, 2));
  ASSERT_TRUE(a.WaitEvent(Kind::kProgress).has_value());
  JobStatusSnapshot pending = GetJobStatus(Query("job-1")).value();
  EXPECT_EQ(pending.phase, JobPhase::kPending);
  ASSERT_EQ(pending.nodes.size(), 1u);
  EXPECT_EQ(pending.nodes[0].group_rank, -1);
  EXPECT_GT(pending.nodes[0].last_heartbeat, absl::Now() - absl::Seconds(10));

  AddAgent().Start(TestNode("n1", 1001, 1), Spec(2, 2));
  ASSERT_TRUE(a.WaitEvent(Kind::kRoundStarted).has_value());
  JobStatusSnapshot running = GetJobStatus(Query("job-1")).value();
  EXPECT_EQ(running.phase, JobPhase::kRunning);
  EXPECT_EQ(running.round, 1);
  EXPECT_EQ(running.max_restarts, 3);
  ASSERT_EQ(running.nodes.size(), 2u);
  EXPECT_EQ(running.nodes[1].host, "n1");
  EXPECT_EQ(running.nodes[1].group_rank, 1);
  EXPECT_EQ(running.participants.size(), 2u);
  EXPECT_STREQ(JobPhaseName(running.phase), "Running");

  EXPECT_TRUE(absl::IsNotFound(GetJobStatus(Query("nope")).status()));
}

TEST_F(RendezvousTest, WorkersAndConditionsTravelToTheJobStatus) {
  StartServer();
  std::vector<Assignment> rounds = FormThree(Spec(3, 3));
  const int local_sizes[] = {2, 1, 3};  // as FormThree
  for (int i = 0; i < 3; ++i) {
    std::vector<StartedWorker> started;
    for (int local = 0; local < local_sizes[i]; ++local) {
      started.push_back(StartedWorker{
          .local_rank = local, .rank = rounds[i].rank_base + local, .pid = 100 * (i + 1) + local});
    }
    agents_[i]->Call([&](GrpcRendezvousClient& c) { c.ReportWorkersStarted(1, started); });
  }
  // Rank 3 (node 2, local rank 0) is killed by SIGKILL.
  agents_[2]->Call([&](GrpcRendezvousClient& c) {
    c.ReportWorkerEnded(1, EndedWorker{.local_rank = 0,
                                       .pid = 300,
                                       .code = 137,
                                       .signal = 9,
                                       .what = "signal 9 (SIGKILL)",
                                       .stopped = false});
  });
  // Messages of one stream arrive in order: once the last one is seen, all are.
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  JobStatusSnapshot s;
  do {
    s = GetJobStatus(Query("job-1")).value();
    if (s.workers.size() == 6 && s.workers[3].state == WorkerState::kFailed &&
        s.workers[0].pid != 0 && s.workers[2].pid != 0) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  } while (absl::Now() < deadline);
  ASSERT_EQ(s.workers.size(), 6u);
  const int pids[] = {100, 101, 200, 300, 301, 302};
  const int groups[] = {0, 0, 1, 2, 2, 2};
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(s.workers[r].rank, r);
    EXPECT_EQ(s.workers[r].pid, pids[r]) << r;
    EXPECT_EQ(s.workers[r].group_rank, groups[r]) << r;
    EXPECT_EQ(s.workers[r].host, "n" + std::to_string(groups[r]));
  }
  EXPECT_EQ(s.workers[3].state, WorkerState::kFailed);
  EXPECT_EQ(s.workers[3].code, 137);
  EXPECT_EQ(s.workers[3].signal, 9);
  EXPECT_EQ(s.workers[3].what, "signal 9 (SIGKILL)");
  EXPECT_EQ(s.workers[4].state, WorkerState::kRunning);
  ASSERT_EQ(s.conditions.size(), 5u);
  EXPECT_EQ(s.conditions[1].type, "Running");
  EXPECT_TRUE(s.conditions[1].status);
  EXPECT_EQ(s.conditions[1].reason, "RoundStarted");
  EXPECT_GT(s.conditions[1].last_transition, absl::Now() - absl::Seconds(30));
  EXPECT_LE(s.conditions[0].last_transition, s.conditions[1].last_transition);
  EXPECT_EQ(s.nodes[0].state, NodeState::kRunning);
}

TEST_F(RendezvousTest, SuccessFinishesEveryNodeWithZero) {
  StartServer();
  FormThree(Spec(3, 3));
  for (auto& agent : agents_) agent->Call([](GrpcRendezvousClient& c) { c.ReportSucceeded(1); });
  for (auto& agent : agents_) {
    std::optional<Event> e = agent->WaitEvent(Kind::kFinished);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->outcome.exit_code, 0);
  }
  for (auto& agent : agents_) EXPECT_EQ(agent->errors_seen(), 0);
}

TEST_F(RendezvousTest, ServerShutdownIsUnavailable) {
  StartServer();
  TestAgent& a = AddAgent();
  a.Start(TestNode("n0", 1000), Spec(2, 2));
  ASSERT_TRUE(a.WaitEvent(Kind::kProgress).has_value());
  server_->Shutdown();
  std::optional<absl::Status> e = a.WaitError();
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(absl::IsUnavailable(*e)) << *e;
}

TEST_F(RendezvousTest, LeaveIsNotAnError) {
  StartServer();
  FormThree(Spec(2, 3));
  agents_[2]->Call([](GrpcRendezvousClient& c) { c.Leave("SIGTERM"); });
  std::optional<Event> e = agents_[0]->WaitEvent(Kind::kStopWorkers);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->text.find("SIGTERM"), std::string::npos) << e->text;
  // The server ends the leaver's stream; once the client has seen that end, any error it
  // would report is on its loop, which the second Call drains.
  bool ended = false;
  agents_[2]->Call([&](GrpcRendezvousClient& c) { ended = c.WaitStreamEnded(absl::Seconds(10)); });
  ASSERT_TRUE(ended);
  agents_[2]->Call([](GrpcRendezvousClient&) {});
  EXPECT_EQ(agents_[2]->errors_seen(), 0);
}

// A plain TCP listener on a free loopback port: it stands where the server will be.
int Listen(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 8) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

TEST_F(RendezvousTest, ServerStartingLateIsWaitedFor) {
  // Nothing answers at first: the agent's connection reaching the port, accepted and closed
  // without a word of HTTP/2, is its failed first attempt. Only then does the server start
  // there, so the agent must have waited for it (no fixed sleep that a slow start outlasts).
  int port = 0;
  int listener = Listen(&port);
  ASSERT_GE(listener, 0) << strerror(errno);
  endpoint_ = {.host = "127.0.0.1", .port = port};
  TestAgent& a = AddAgent();
  a.Start(TestNode("n0", 1000), Spec(1, 1));
  pollfd attempt{.fd = listener, .events = POLLIN, .revents = 0};
  ASSERT_EQ(poll(&attempt, 1, /*timeout_ms=*/10000), 1) << "the agent never tried to connect";
  int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(conn, 0) << strerror(errno);
  close(conn);
  close(listener);
  RendezvousServer::Options options;
  options.listen_address = endpoint_.ToString();
  server_ = RendezvousServer::Start(options).value();
  std::optional<Event> e = a.WaitEvent(Kind::kRoundStarted);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(a.errors_seen(), 0);
}

TEST_F(RendezvousTest, UnresolvableHostIsRetriedThenUnavailable) {
  GrpcRendezvousClient::Options options;
  options.endpoint = {.host = "no-such-host.invalid", .port = 29400};
  options.join_timeout = absl::Milliseconds(1500);
  agents_.push_back(std::make_unique<TestAgent>(options));
  absl::Time start = absl::Now();
  agents_[0]->Start(TestNode("n0", 1000), Spec(1, 1));
  std::optional<absl::Status> e = agents_[0]->WaitError();
  absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(absl::IsUnavailable(*e) || absl::IsDeadlineExceeded(*e)) << *e;
  EXPECT_NE(e->message().find("does not resolve"), absl::string_view::npos) << *e;
  EXPECT_GE(took, absl::Milliseconds(1400));
  EXPECT_LT(took, absl::Seconds(5));
}

}  // namespace
}  // namespace muster::rdzv
