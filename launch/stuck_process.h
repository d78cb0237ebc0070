// A process of the job that outlived SIGKILL, as /proc shows it (docs/guides/stopping-workers.md
// "Workers stuck in the kernel"). SIGKILL takes effect when a process returns from the kernel;
// one in uninterruptible sleep (state D: a hung NFS or FUSE mount, a frozen filesystem, a
// driver call) does not return until what it waits for happens, which may be never. Its
// state and wchan (where in the kernel it waits) say which of these it is.
#ifndef MUSTER_LAUNCH_STUCK_PROCESS_H_
#define MUSTER_LAUNCH_STUCK_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace muster {

struct StuckProcess {
  pid_t pid = 0;
  int rank = -1;  // a worker's global and local rank; -1 for another process of the job
  int local_rank = -1;
  char state = '?';   // /proc/PID/stat's state: D (uninterruptible sleep), Z, S, ...; '?' gone
  std::string wchan;  // /proc/PID/wchan: the kernel function it waits in; "" when unknown
};

// `pid`'s state and wchan, read now (the caller fills in the ranks).
StuckProcess DescribeStuckProcess(pid_t pid);

// "rank 0 (local_rank 0, pid 4242): state D (uninterruptible sleep), wchan
// percpu_rwsem_wait", or "pid 4243: ..." for a process that is no worker.
std::string StuckProcessLine(const StuckProcess& p);

// Every process's line, "; "-separated.
std::string StuckProcessesLine(const std::vector<StuckProcess>& stuck);

}  // namespace muster

#endif  // MUSTER_LAUNCH_STUCK_PROCESS_H_
