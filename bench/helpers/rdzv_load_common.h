// What B2's two load generators (rdzv_load.cc: gRPC C++ client; rdzv_h2load.cc: HTTP/2 by
// hand) share: the Join each simulated agent sends, their clocks and CPU counters, the fd
// limit, and JSON string quoting for their one-line report.
#ifndef MUSTER_BENCH_HELPERS_RDZV_LOAD_COMMON_H_
#define MUSTER_BENCH_HELPERS_RDZV_LOAD_COMMON_H_

#include <errno.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "muster/v1/rendezvous.pb.h"

namespace muster::bench {

// Simulated agent `index` of an M-agent job that forms one round of all M (min = max = M).
inline v1::AgentMessage B2Join(const std::string& run_id, int m, int index, int local_world_size,
                               int heartbeat_interval_ms, bool wants_node_list) {
  v1::AgentMessage join;
  v1::Join* j = join.mutable_join();
  j->set_run_id(run_id);
  v1::JobSpec* spec = j->mutable_spec();
  spec->set_min_nodes(m);
  spec->set_max_nodes(m);
  spec->set_max_restarts(0);
  spec->set_join_timeout_ms(600000);
  spec->set_last_call_timeout_ms(1000);
  spec->set_heartbeat_interval_ms(heartbeat_interval_ms);
  spec->set_heartbeat_misses(30);
  spec->set_stop_timeout_ms(10000);
  v1::NodeInfo* node = j->mutable_node();
  node->set_node_id("b2-" + std::to_string(index));
  node->set_host("127.0.0.1");
  node->set_address("127.0.0.1");
  node->set_rank_hint(-1);
  node->set_local_world_size(local_world_size);
  node->set_store_port(0);
  node->set_wants_node_list(wants_node_list);
  return join;
}

// This process's user + system CPU seconds; exits 2 if they cannot be read.
inline double CpuSeconds() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) {
    std::fprintf(stderr, "%s: getrusage: %s\n", program_invocation_short_name,
                 std::strerror(errno));
    std::exit(2);
  }
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

inline double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// One fd per simulated agent: the soft limit goes up to the hard one; exits 2 on failure.
inline void RaiseFdLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) == 0) return;
  }
  std::fprintf(stderr, "%s: raising RLIMIT_NOFILE: %s\n", program_invocation_short_name,
               std::strerror(errno));
  std::exit(2);
}

// `s` as a JSON string: quotes and backslashes escaped, control characters as spaces.
inline std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace muster::bench

#endif  // MUSTER_BENCH_HELPERS_RDZV_LOAD_COMMON_H_
