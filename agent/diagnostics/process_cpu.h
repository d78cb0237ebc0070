// ProcessTreeCpu: the CPU time a process and everything it started have used, from /proc,
// for hang detection (agent/diagnostics/hang_watch.h). A process's descendants are found through
// the ppid of every process in /proc; children already reaped count through the parent's
// cutime/cstime. Plain functions; thread-safe.
#ifndef MUSTER_AGENT_PROCESS_CPU_H_
#define MUSTER_AGENT_PROCESS_CPU_H_

#include <sys/types.h>

#include <map>
#include <vector>

#include "absl/time/time.h"
#include "base/proc_stat.h"

namespace muster {

// A process's CPU time as hang detection counts it: user + system, its own and its reaped
// children's (base/proc_stat.h holds the fields).
absl::Duration TreeCpuOf(const ProcStat& st);

// For each of `roots`: the CPU time of it and its live descendants. A root that is gone is
// left out. One pass over /proc: O(processes on the machine).
std::map<pid_t, absl::Duration> ProcessTreeCpu(const std::vector<pid_t>& roots);

}  // namespace muster

#endif  // MUSTER_AGENT_PROCESS_CPU_H_
