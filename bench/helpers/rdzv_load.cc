// rdzv_load: M simulated muster agents against a real `muster serve` (B2, reference/perf.md §7).
//
//   rdzv_load PORT M [--heartbeat-secs S] [--hb-interval-ms I] [--run-id ID]
//                    [--local-world-size L] [--report-workers] [--keepalive-ms K]
//                    [--tcp-keepalive-ms T] [--no-app-heartbeats] [--host H]
//
// The C++ twin of rdzv_load.py, with the same output contract (one JSON line on stdout;
// "hb_window start/end" lines on stderr around the heartbeat window; here also "phase join
// start/end" and "phase leave start/end" around those phases), so that
// bench/b2_rendezvous.py can drive either. Every agent has its own channel and its own TCP
// connection (local subchannel pool), connected before the clock starts. Then each does what
// rendezvous/grpc/client.cc does: one Session stream, Join first (min = max nodes = M, so the
// round starts when the last agent joins), wait for RoundStarted (optionally answer with
// WorkersStarted), Heartbeat every I ms for S seconds, Leave. Reported: connect_ms,
// round_ms (first Join written -> last RoundStarted read), leave_ms (first Leave written ->
// last stream done) and this process's CPU per phase (client_cpu_{connect,round,leave}_s).
//
// --keepalive-ms K: HTTP/2 keepalive pings every K ms, as a real agent sends them (client.cc
// uses its heartbeat interval); 0 (the default, as rdzv_load.py) sends none.
// --tcp-keepalive-ms T: TCP keepalive on each connection (probe after T ms of silence,
// reset after 3 T), as rendezvous/grpc/credentials.cc gives an agent's channel.
// --no-app-heartbeats: stay joined for S seconds without Heartbeat messages (liveness left to
// the transport).
//
// Threads: gRPC's callback threads run the reactors; the main thread connects, writes the
// heartbeats on a fixed schedule (agent i at offset i x I / M) and waits with deadlines.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "muster/v1/rendezvous.grpc.pb.h"
#include "rdzv_load_common.h"
#include "rendezvous/grpc/tcp_keepalive.h"

namespace {

using Clock = std::chrono::steady_clock;
using muster::CondVar;
using muster::Mutex;
using muster::MutexLock;
using muster::bench::CpuSeconds;
using muster::bench::JsonString;
using muster::bench::MonotonicSeconds;
using muster::bench::Ms;
using muster::bench::RaiseFdLimit;
namespace v1 = muster::v1;

struct Args {
  int port = 0;
  int m = 0;
  std::string host = "127.0.0.1";
  std::string run_id = "b2";
  double heartbeat_secs = 0;
  int hb_interval_ms = 1000;
  int local_world_size = 1;
  bool report_workers = false;
  int keepalive_ms = 0;
  int tcp_keepalive_ms = 0;
  bool app_heartbeats = true;
};

// Shared progress of all agents; the main thread waits on it.
struct Progress {
  Mutex mu;
  CondVar cv;
  int round_started ABSL_GUARDED_BY(mu) = 0;
  int done ABSL_GUARDED_BY(mu) = 0;
  Clock::time_point last_round_started ABSL_GUARDED_BY(mu);
  Clock::time_point last_done ABSL_GUARDED_BY(mu);
  std::vector<std::string> errors ABSL_GUARDED_BY(mu);

  void Error(std::string what) {
    MutexLock lock(&mu);
    errors.push_back(std::move(what));
    cv.SignalAll();
  }
};

// One agent's Session stream: one read pending, writes queued with one in flight (as
// rendezvous/grpc/client.cc's AgentStream). Lives until the process exits.
class Agent : public grpc::ClientBidiReactor<v1::AgentMessage, v1::ServerMessage> {
 public:
  Agent(const Args& args, int index, Progress* progress)
      : args_(args), index_(index), progress_(progress) {}

  void Begin(v1::Rendezvous::Stub* stub) {
    stub->async()->Session(&context_, this);
    StartRead(&in_);
    Send(muster::bench::B2Join(args_.run_id, args_.m, index_, args_.local_world_size,
                               args_.hb_interval_ms, /*wants_node_list=*/false));
    StartCall();
  }

  void Send(v1::AgentMessage msg) {
    const v1::AgentMessage* next = nullptr;
    {
      MutexLock lock(&mu_);
      if (closed_) return;
      out_.push_back(std::move(msg));
      if (writing_) return;
      writing_ = true;
      next = &out_.front();
    }
    StartWrite(next);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    if (in_.kind_case() == v1::ServerMessage::kRoundStarted) {
      if (args_.report_workers) {
        const v1::Assignment& a = in_.round_started().assignment();
        v1::AgentMessage started;
        v1::WorkersStarted* w = started.mutable_workers_started();
        w->set_round(a.round());
        for (int lr = 0; lr < args_.local_world_size; ++lr) {
          v1::StartedWorker* sw = w->add_workers();
          sw->set_local_rank(lr);
          sw->set_rank(a.rank_base() + lr);
          sw->set_pid(100000 + a.rank_base() + lr);
        }
        Send(std::move(started));
      }
      MutexLock lock(&progress_->mu);
      if (++progress_->round_started == args_.m) {
        progress_->last_round_started = Clock::now();
        progress_->cv.SignalAll();
      }
    } else if (in_.kind_case() == v1::ServerMessage::kError) {
      progress_->Error(in_.error().message());
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    const v1::AgentMessage* next = nullptr;
    {
      MutexLock lock(&mu_);
      out_.pop_front();
      writing_ = false;
      if (!ok) {
        closed_ = true;
        out_.clear();
      }
      if (!out_.empty()) {
        writing_ = true;
        next = &out_.front();
      }
    }
    if (next != nullptr) StartWrite(next);
  }

  void OnDone(const grpc::Status& status) override {
    if (!status.ok() && !leaving_.load()) {
      progress_->Error("stream " + std::to_string(index_) + ": " + status.error_message());
    }
    MutexLock lock(&progress_->mu);
    if (++progress_->done == args_.m) {
      progress_->last_done = Clock::now();
      progress_->cv.SignalAll();
    }
  }

  void Leave() {
    leaving_ = true;
    v1::AgentMessage leave;
    leave.mutable_leave()->set_why("benchmark over");
    Send(std::move(leave));
  }

  void Cancel() { context_.TryCancel(); }

 private:
  const Args& args_;
  const int index_;
  Progress* const progress_;
  grpc::ClientContext context_;
  v1::ServerMessage in_;
  std::atomic<bool> leaving_{false};
  Mutex mu_;
  std::deque<v1::AgentMessage> out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "rdzv_load: %s\nusage: rdzv_load PORT M [--heartbeat-secs S] [--hb-interval-ms I] "
               "[--run-id ID] [--local-world-size L] [--report-workers] [--keepalive-ms K] "
               "[--tcp-keepalive-ms T] [--no-app-heartbeats] [--host H]\n",
               why);
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(("missing value for " + arg).c_str());
      return argv[++i];
    };
    if (arg == "--heartbeat-secs") {
      a.heartbeat_secs = std::stod(value());
    } else if (arg == "--hb-interval-ms") {
      a.hb_interval_ms = std::stoi(value());
    } else if (arg == "--run-id") {
      a.run_id = value();
    } else if (arg == "--local-world-size") {
      a.local_world_size = std::stoi(value());
    } else if (arg == "--report-workers") {
      a.report_workers = true;
    } else if (arg == "--keepalive-ms") {
      a.keepalive_ms = std::stoi(value());
    } else if (arg == "--tcp-keepalive-ms") {
      a.tcp_keepalive_ms = std::stoi(value());
    } else if (arg == "--no-app-heartbeats") {
      a.app_heartbeats = false;
    } else if (arg == "--host") {
      a.host = value();
    } else if (!arg.empty() && arg[0] == '-') {
      Usage(("unknown flag " + arg).c_str());
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.size() != 2) Usage("needs PORT and M");
  a.port = std::stoi(positional[0]);
  a.m = std::stoi(positional[1]);
  if (a.m < 1 || a.hb_interval_ms < 1) Usage("M and the heartbeat interval must be >= 1");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = Parse(argc, argv);
  RaiseFdLimit();
  const std::string target = a.host + ":" + std::to_string(a.port);
  const auto kPhaseTimeout = std::chrono::seconds(600);

  // Phase 1 (untimed for the round): one channel and TCP connection per agent.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::Rendezvous::Stub>> stubs;
  channels.reserve(a.m);
  double cpu0 = CpuSeconds();
  Clock::time_point t0 = Clock::now();
  for (int i = 0; i < a.m; ++i) {
    grpc::ChannelArguments ch_args;
    ch_args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    ch_args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    if (a.keepalive_ms > 0) {
      // What client.cc sets through connect.cc: a ping every interval.
      ch_args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, a.keepalive_ms);
      ch_args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, a.keepalive_ms * 29);
      ch_args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
      ch_args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    }
    if (a.tcp_keepalive_ms > 0) {
      // What an agent's channel has since liveness moved to TCP keepalive (3 misses).
      muster::rdzv::grpc_internal::AddTcpKeepalive(
          {absl::Milliseconds(a.tcp_keepalive_ms), absl::Milliseconds(3 * a.tcp_keepalive_ms)},
          &ch_args);
    }
    channels.push_back(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), ch_args));
    channels.back()->GetState(/*try_to_connect=*/true);
  }
  for (int i = 0; i < a.m; ++i) {
    if (!channels[i]->WaitForConnected(std::chrono::system_clock::now() + kPhaseTimeout)) {
      std::fprintf(stderr, "rdzv_load: channel %d did not connect\n", i);
      return 3;
    }
    stubs.push_back(v1::Rendezvous::NewStub(channels[i]));
  }
  double connect_ms = Ms(Clock::now() - t0);
  double cpu_connect = CpuSeconds() - cpu0;

  // Phase 2: every agent joins; the round starts when the last one has.
  Progress progress;
  std::vector<std::unique_ptr<Agent>> agents;
  agents.reserve(a.m);
  for (int i = 0; i < a.m; ++i) agents.push_back(std::make_unique<Agent>(a, i, &progress));
  // Markers for the driver, which samples the server's CPU at each.
  std::fprintf(stderr, "phase join start\n");
  double cpu1 = CpuSeconds();
  Clock::time_point t_first = Clock::now();
  for (int i = 0; i < a.m; ++i) agents[i]->Begin(stubs[i].get());
  bool formed = false;
  Clock::time_point last_round_started;
  {
    MutexLock lock(&progress.mu);
    const absl::Time deadline = absl::Now() + absl::FromChrono(kPhaseTimeout);
    while (progress.round_started != a.m && progress.errors.empty()) {
      if (progress.cv.WaitWithDeadline(&progress.mu, deadline)) break;
    }
    formed = progress.round_started == a.m;
    last_round_started = progress.last_round_started;
  }
  double cpu_round = CpuSeconds() - cpu1;
  std::fprintf(stderr, "phase join end\n");

  std::string extra;
  if (formed && a.heartbeat_secs > 0) {
    // Settle: WorkersStarted and the first heartbeat of everyone out of the way.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    auto interval = std::chrono::milliseconds(a.hb_interval_ms);
    Clock::time_point start = Clock::now();
    Clock::time_point end = start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(a.heartbeat_secs));
    double cpu2 = CpuSeconds();
    std::fprintf(stderr, "hb_window start %.6f\n", MonotonicSeconds());
    long sent = 0;
    if (a.app_heartbeats) {
      for (long tick = 0;; ++tick) {
        Clock::time_point slot = start + interval * (tick / a.m) + interval * (tick % a.m) / a.m;
        if (slot >= end) break;
        std::this_thread::sleep_until(slot);
        v1::AgentMessage beat;
        beat.mutable_heartbeat();
        agents[tick % a.m]->Send(std::move(beat));
        ++sent;
      }
    }
    std::this_thread::sleep_until(end);
    std::fprintf(stderr, "hb_window end %.6f\n", MonotonicSeconds());
    char buf[160];
    std::snprintf(buf, sizeof buf, ", \"client_cpu_hb_s\": %.6f, \"heartbeats_sent\": %ld",
                  CpuSeconds() - cpu2, sent);
    extra += buf;
  }

  // Phase 3: Leave; the server ends each stream.
  if (formed) {
    std::fprintf(stderr, "phase leave start\n");
    double cpu3 = CpuSeconds();
    Clock::time_point t_leave = Clock::now();
    for (auto& agent : agents) agent->Leave();
    MutexLock lock(&progress.mu);
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (progress.done != a.m) {
      if (progress.cv.WaitWithDeadline(&progress.mu, deadline)) break;
    }
    bool all_done = progress.done == a.m;
    double cpu_leave = CpuSeconds() - cpu3;
    std::fprintf(stderr, "phase leave end\n");
    char buf[120];
    if (all_done) {
      std::snprintf(buf, sizeof buf, ", \"leave_ms\": %.3f, \"client_cpu_leave_s\": %.6f",
                    Ms(progress.last_done - t_leave), cpu_leave);
    } else {
      std::snprintf(buf, sizeof buf,
                    ", \"leave_ms\": null, \"leave_pending\": %d, \"client_cpu_leave_s\": %.6f",
                    a.m - progress.done, cpu_leave);
    }
    extra += buf;
  }

  std::string errors = "[";
  size_t n_errors = 0;
  {
    MutexLock lock(&progress.mu);
    n_errors = progress.errors.size();
    for (size_t i = 0; i < progress.errors.size() && i < 3; ++i) {
      errors += (i ? ", " : "") + JsonString(progress.errors[i]);
    }
  }
  errors += "]";
  char round_ms[40] = "null";
  if (formed) {
    std::snprintf(round_ms, sizeof round_ms, "%.3f", Ms(last_round_started - t_first));
  }
  std::printf(
      "{\"m\": %d, \"client\": \"c++\", \"connect_ms\": %.3f, \"client_cpu_connect_s\": %.6f, "
      "\"round_ms\": %s, \"client_cpu_round_s\": %.6f, \"errors\": %s, \"n_errors\": %zu%s}\n",
      a.m, connect_ms, cpu_connect, round_ms, cpu_round, errors.c_str(), n_errors, extra.c_str());
  std::fflush(stdout);
  // Tearing down thousands of channels one by one takes longer than the benchmark.
  _exit(formed ? 0 : 1);
}
