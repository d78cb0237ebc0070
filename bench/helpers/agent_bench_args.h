// Shared by B2's agent helpers (rdzv_agents, etcd_light_agents): "--flag VALUE" pairs into
// named ints and strings, and the process's CPU time. Header-only: each helper is one file.
#ifndef MUSTER_BENCH_HELPERS_AGENT_BENCH_ARGS_H_
#define MUSTER_BENCH_HELPERS_AGENT_BENCH_ARGS_H_

#include <sys/resource.h>

#include <map>
#include <string>

#include "absl/strings/numbers.h"

namespace muster::bench {

// Sets each flag's value; `usage` (which exits) for an odd count, a bad number or an unknown
// flag.
inline void ParseFlagPairs(int argc, char** argv, const std::map<std::string, int*>& ints,
                           const std::map<std::string, std::string*>& strings,
                           void (*usage)(const std::string&)) {
  if (argc % 2 == 0) usage("flags come in pairs: --flag VALUE");
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (auto it = ints.find(flag); it != ints.end()) {
      if (!absl::SimpleAtoi(argv[i + 1], it->second)) usage(flag + " takes a number");
    } else if (auto s = strings.find(flag); s != strings.end()) {
      *s->second = argv[i + 1];
    } else {
      usage("unknown flag " + flag);
    }
  }
}

// User + system CPU seconds of this process (0 if getrusage fails).
inline double CpuSeconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace muster::bench

#endif  // MUSTER_BENCH_HELPERS_AGENT_BENCH_ARGS_H_
