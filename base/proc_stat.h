// ProcStat: one /proc/PID/stat line (proc(5)), parsed once for everyone who reads it: hang
// detection's CPU time of a worker tree (agent/diagnostics/process_cpu.h), the agent's own
// process metrics (metrics/process_collector.h) and the state of a process that outlived
// SIGKILL (launch/stuck_process.h). Plain functions; thread-safe.
#ifndef MUSTER_BASE_PROC_STAT_H_
#define MUSTER_BASE_PROC_STAT_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace muster {

// The fields muster reads, in the kernel's units (times in clock ticks: ClockTicksPerSecond).
struct ProcStat {
  char state = '?';   // field 3: R, S, D, Z, T, ...
  pid_t ppid = 0;     // field 4
  int64_t utime = 0;  // fields 14-17: the process's own user and system time, and
  int64_t stime = 0;  //   its reaped children's
  int64_t cutime = 0;
  int64_t cstime = 0;
  int64_t starttime = 0;  // field 22: ticks after boot
  int64_t vsize = 0;      // field 23: bytes
  int64_t rss_pages = 0;  // field 24: pages
};

// Parses the text of /proc/PID/stat. The command name (field 2) may hold spaces and
// parentheses: it ends at the last ')'. nullopt when the text is not that format.
std::optional<ProcStat> ParseProcStat(std::string_view text);

// Reads /proc/`pid`/stat ("self" for `pid` 0); "" when the process is gone.
std::string ReadProcStatText(pid_t pid);

// ReadProcStatText + ParseProcStat: nullopt when the process is gone or the line is not one.
std::optional<ProcStat> ReadProcStat(pid_t pid);

// sysconf(_SC_CLK_TCK), 100 where it does not say.
int64_t ClockTicksPerSecond();

}  // namespace muster

#endif  // MUSTER_BASE_PROC_STAT_H_
