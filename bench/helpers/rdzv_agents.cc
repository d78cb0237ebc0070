// rdzv_agents: M agents' rendezvous in one process with the real clients (rendezvous/etcd's
// EtcdRendezvousClient or rendezvous/grpc's GrpcRendezvousClient) on one EventLoop, no
// workers: a round's start is recorded, a stop is answered with ReportStopped at once.
// The light client of bench/b2_etcd.py (B2 for the etcd backend, side by side with muster's
// own server).
//
//   rdzv_agents --backend etcd|grpc --endpoints E[,E...] --agents M [--min N] [--max N]
//               [--rounds R] [--run-id ID] [--prefix P] [--heartbeat-ms H] [--misses K]
//               [--last-call-ms L] [--timeout-s T]
//
// Exits once every agent has seen R rounds start (default 1). stderr: "round R t=SECONDS"
// when every agent has seen round R start (CLOCK_MONOTONIC, as Python's time.monotonic);
// stdout: one JSON line {"agents", "start", "rounds": [{"round", "first", "last"}...],
// "round_ms" (start -> last RoundStarted of the first round), "client_cpu_s"}.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/endpoint.h"
#include "base/event_loop.h"
#include "bench/helpers/agent_bench_args.h"
#include "rendezvous/client.h"
#include "rendezvous/etcd/etcd_rendezvous.h"
#include "rendezvous/grpc/client.h"

namespace {

using muster::EventLoop;
using muster::rdzv::Event;
using muster::rdzv::RendezvousClient;

struct Args {
  std::string backend = "etcd";
  std::string endpoints;
  std::string run_id = "b2";
  std::string prefix = "/muster";
  int agents = 16;
  int min = 0;  // 0: agents
  int max = 0;  // 0: agents
  int rounds = 1;
  int heartbeat_ms = 1000;
  int misses = 2;
  int last_call_ms = 200;
  int timeout_s = 120;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr, "rdzv_agents: %s\n", why.c_str());
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  std::map<std::string, int*> ints = {{"--agents", &a.agents},
                                      {"--min", &a.min},
                                      {"--max", &a.max},
                                      {"--rounds", &a.rounds},
                                      {"--heartbeat-ms", &a.heartbeat_ms},
                                      {"--misses", &a.misses},
                                      {"--last-call-ms", &a.last_call_ms},
                                      {"--timeout-s", &a.timeout_s}};
  std::map<std::string, std::string*> strings = {{"--backend", &a.backend},
                                                 {"--endpoints", &a.endpoints},
                                                 {"--run-id", &a.run_id},
                                                 {"--prefix", &a.prefix}};
  muster::bench::ParseFlagPairs(argc, argv, ints, strings, Usage);
  if (a.endpoints.empty() || a.agents < 1) Usage("give --endpoints and --agents >= 1");
  if (a.min == 0) a.min = a.agents;
  if (a.max == 0) a.max = a.agents;
  return a;
}

double Mono() { return absl::ToDoubleSeconds(EventLoop::Now() - absl::UnixEpoch()); }

std::unique_ptr<RendezvousClient> MakeClient(const Args& a, EventLoop* loop) {
  if (a.backend == "etcd") {
    auto c = muster::rdzv::etcd::EtcdRendezvousClient::Create(
        {.endpoints = absl::StrSplit(a.endpoints, ','),
         .prefix = a.prefix,
         .loop = loop,
         .join_timeout = absl::Seconds(a.timeout_s)});
    if (!c.ok()) Usage(c.status().ToString());
    return *std::move(c);
  }
  if (a.backend == "grpc") {
    absl::StatusOr<muster::Endpoint> endpoint =
        muster::ParseEndpoint("--endpoints", a.endpoints, 0);
    if (!endpoint.ok()) Usage(endpoint.status().ToString());
    auto c = muster::rdzv::GrpcRendezvousClient::Create(
        {.endpoint = *endpoint, .loop = loop, .join_timeout = absl::Seconds(a.timeout_s)});
    if (!c.ok()) Usage(c.status().ToString());
    return *std::move(c);
  }
  Usage("--backend is etcd or grpc");
}

struct RoundTimes {
  int seen = 0;
  double first = 0;
  double last = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  auto loop = EventLoop::Create();
  if (!loop.ok()) Usage(loop.status().ToString());
  muster::rdzv::JobSpec spec{.run_id = a.run_id,
                             .min_nodes = a.min,
                             .max_nodes = a.max,
                             .join_timeout = absl::Seconds(a.timeout_s),
                             .last_call_timeout = absl::Milliseconds(a.last_call_ms),
                             .heartbeat_interval = absl::Milliseconds(a.heartbeat_ms),
                             .heartbeat_misses = a.misses};
  std::vector<std::unique_ptr<RendezvousClient>> clients;
  std::map<int, RoundTimes> rounds;  // by the order of rounds seen (1, 2, ...)
  std::vector<int> seen(a.agents, 0);
  std::vector<int> current(a.agents, 0);  // each agent's round (its last RoundStarted)
  int done = 0;
  bool failed = false;
  for (int i = 0; i < a.agents; ++i) clients.push_back(MakeClient(a, loop->get()));
  const double cpu0 = muster::bench::CpuSeconds();
  const double start = Mono();
  for (int i = 0; i < a.agents; ++i) {
    muster::rdzv::NodeInfo node{.node_id = absl::StrCat("bench:", getpid(), ":", i),
                                .host = "bench",
                                .address = "127.0.0.1",
                                .store_port = 20000 + i % 40000};
    RendezvousClient* client = clients[i].get();
    client->Start(
        node, spec,
        [&, i, client](const Event& e) {
          if (e.kind == Event::Kind::kStopWorkers) {
            client->ReportStopped(current[i], 20000 + i % 40000);
            return;
          }
          if (e.kind == Event::Kind::kFinished) {
            failed = true;
            return;
          }
          if (e.kind != Event::Kind::kRoundStarted) return;
          current[i] = e.assignment.round;
          RoundTimes& r = rounds[++seen[i]];
          const double now = Mono();
          if (r.seen++ == 0) r.first = now;
          r.last = now;
          if (r.seen == static_cast<int>(clients.size())) {
            std::fprintf(stderr, "round %d t=%.6f\n", seen[i], now);
          }
          if (seen[i] == a.rounds) ++done;
        },
        [&](const muster::rdzv::RendezvousError& e) {
          std::fprintf(stderr, "agent error: %s\n", e.status.ToString().c_str());
          failed = true;
        });
  }
  const absl::Time deadline = EventLoop::Now() + absl::Seconds(a.timeout_s);
  while (done < a.agents && !failed && EventLoop::Now() < deadline) {
    if (!(*loop)->RunOnce(absl::Milliseconds(100)).ok()) break;
  }
  const double cpu = muster::bench::CpuSeconds() - cpu0;
  std::string out =
      absl::StrCat("{\"agents\": ", a.agents, ", \"backend\": \"", a.backend,
                   "\", \"start\": ", absl::StrFormat("%.6f", start),
                   ", \"ok\": ", done == a.agents ? "true" : "false", ", \"rounds\": [");
  for (const auto& [n, r] : rounds) {
    absl::StrAppend(&out, n > 1 ? ", " : "", "{\"round\": ", n, ", \"agents\": ", r.seen,
                    ", \"first\": ", absl::StrFormat("%.6f", r.first),
                    ", \"last\": ", absl::StrFormat("%.6f", r.last), "}");
  }
  double round_ms = rounds.count(1) ? (rounds[1].last - start) * 1e3 : -1;
  absl::StrAppend(&out, "], \"round_ms\": ", round_ms, ", \"client_cpu_s\": ", cpu, "}");
  std::printf("%s\n", out.c_str());
  std::fflush(stdout);
  // Leaving costs M revokes (etcd) or M stream ends: not measured; _exit skips it.
  _exit(done == a.agents ? 0 : 1);
}
