#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "gtest/gtest.h"
#include "metrics/agent_metrics.h"
#include "metrics/metrics_server.h"
#include "metrics/process_collector.h"
#include "metrics/server_metrics.h"

namespace muster::metrics {
namespace {

// GET /metrics from 127.0.0.1:`port`; the whole response.
std::string Scrape(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{.tv_sec = 10, .tv_usec = 0};  // a hung server fails the test, not CI
  EXPECT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST(ExitCodeLabel, BoundedSet) {
  EXPECT_EQ(ExitCodeLabel(0), "0");
  EXPECT_EQ(ExitCodeLabel(137), "137");
  EXPECT_EQ(ExitCodeLabel(143), "143");
  EXPECT_EQ(ExitCodeLabel(42), "other");
  EXPECT_EQ(ExitCodeLabel(200), "other_signal");
}

TEST(ParseProcStat, CommandWithSpacesAndParentheses) {
  // pid (comm) state ppid ... : utime=100 stime=50 starttime=1000 vsize=4096 rss=3
  std::string text = "42 (a) b) c) S 1 1 1 0 -1 0 0 0 0 0 100 50 0 0 20 0 1 0 1000 4096 3 rest";
  auto stat = ParseProcStat(text, 100, 4096);
  ASSERT_TRUE(stat.has_value());
  EXPECT_DOUBLE_EQ(stat->cpu_seconds, 1.5);
  EXPECT_DOUBLE_EQ(stat->start_seconds, 10);
  EXPECT_DOUBLE_EQ(stat->virtual_bytes, 4096);
  EXPECT_DOUBLE_EQ(stat->resident_bytes, 3 * 4096);
  EXPECT_FALSE(ParseProcStat("42 (x) S 1", 100, 4096).has_value());
}

TEST(MetricsServer, ServesAgentAndServerFamiliesAndKeepsSigchld) {
  // An ignored SIGCHLD would let the kernel reap workers: civetweb sets it, Start undoes it.
  ASSERT_NE(signal(SIGCHLD, SIG_DFL), SIG_ERR);
  auto server = MetricsServer::Start("127.0.0.1:0", "--metrics-port");
  ASSERT_TRUE(server.ok()) << server.status();
  struct sigaction now {};
  ASSERT_EQ(sigaction(SIGCHLD, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
  ASSERT_GT((*server)->port(), 0);

  auto agent = AgentMetrics::Create(server->get());
  agent->SetPhase(AgentPhase::kRendezvous);
  agent->RendezvousOpened();
  agent->RoundStarted(0);
  agent->SetPhase(AgentPhase::kRunning);
  agent->WorkersStarted(2);
  agent->WorkerExited(137, /*while_stopping=*/false, /*was_running=*/true);
  agent->WorkerExited(143, /*while_stopping=*/true, /*was_running=*/true);
  agent->RendezvousOpened();
  agent->RoundStarted(1);
  agent->WorkersStarted(2);
  *agent->store_connections() += 3;

  auto rdzv = ServerMetrics::Create(server->get());
  rdzv->OnJoin();
  rdzv->OnJoin();
  rdzv->OnRoundStarted(absl::Milliseconds(30));
  rdzv->SetCounts([] {
    return rdzv::RegistryCounts{.jobs_by_phase = {{rdzv::JobPhase::kRunning, 1}},
                                .nodes_by_state = {{rdzv::NodeState::kRunning, 2}}};
  });

  std::string text = Scrape((*server)->port());
  EXPECT_NE(text.find("200 OK"), std::string::npos) << text;
  for (const char* line : {
           "muster_agent_phase{phase=\"Running\"} 1",
           "muster_agent_phase{phase=\"Rendezvous\"} 0",
           "muster_workers{state=\"running\"} 2",
           "muster_workers{state=\"failed\"} 0",
           "muster_worker_exits_total{code=\"137\",while=\"running\"} 1",
           "muster_worker_exits_total{code=\"143\",while=\"stopping\"} 1",
           "muster_restarts_total 1",
           "muster_rounds_total 2",
           "muster_rendezvous_round_duration_seconds_count 2",
           "muster_store_connections 3",
           "muster_server_joins_total 2",
           "muster_server_round_duration_seconds_bucket{le=\"0.05\"} 1",
           "muster_server_jobs{phase=\"Running\"} 1",
           "muster_server_jobs{phase=\"Failed\"} 0",
           "muster_server_nodes{state=\"Running\"} 2",
           "process_cpu_seconds_total ",
           "process_resident_memory_bytes ",
           "muster_agent_seconds_since_transition ",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "\n" << text;
  }
  rdzv->SetCounts(nullptr);  // the server is gone: the counts read as none
  text = Scrape((*server)->port());
  EXPECT_NE(text.find("muster_server_jobs{phase=\"Running\"} 0"), std::string::npos) << text;
}

TEST(MetricsServer, PortInUseNamesTheFlag) {
  auto first = MetricsServer::Start("127.0.0.1:0", "--metrics-port");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second =
      MetricsServer::Start("127.0.0.1:" + std::to_string((*first)->port()), "--metrics-port");
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  EXPECT_NE(second.status().message().find("--metrics-port"), absl::string_view::npos);
}

TEST(LocalHostOf, WildcardsAreLoopback) {
  EXPECT_EQ(LocalHostOf("[::]:9400"), "127.0.0.1");
  EXPECT_EQ(LocalHostOf("0.0.0.0:9400"), "127.0.0.1");
  EXPECT_EQ(LocalHostOf("10.0.0.5:9400"), "10.0.0.5");
  EXPECT_EQ(LocalHostOf("[fd00::1]:9400"), "fd00::1");
}

TEST(MetricsServer, StopsAtOnce) {
  // civetweb's accept thread polls with a 2 s timeout; the server must not wait it out.
  auto server = MetricsServer::Start("[::]:0", "--metrics-port");
  ASSERT_TRUE(server.ok()) << server.status();
  auto t0 = std::chrono::steady_clock::now();
  server->reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
}

TEST(CivetListeningPort, DualStackWildcard) {
  EXPECT_EQ(CivetListeningPort("[::]:9400"), "+9400");
  EXPECT_EQ(CivetListeningPort("127.0.0.1:9400"), "127.0.0.1:9400");
  EXPECT_EQ(CivetListeningPort("[fd00::1]:9400"), "[fd00::1]:9400");
}

}  // namespace
}  // namespace muster::metrics
