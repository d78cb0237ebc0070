// WaitReadable: one blocking wait for a file descriptor, bounded by a deadline, for the few
// places that wait outside an event loop (a short-lived helper's pipe and pidfd, a killed
// child's pidfd and SIGCHLD's signalfd at exit).
#ifndef MUSTER_BASE_WAIT_READABLE_H_
#define MUSTER_BASE_WAIT_READABLE_H_

#include "absl/time/time.h"

namespace muster {

// Waits until `fd` is readable (or hung up) or `deadline` passes, retrying on EINTR:
// 1 readable, 0 timed out, -1 poll failed (errno says why).
int WaitReadable(int fd, absl::Time deadline);

}  // namespace muster

#endif  // MUSTER_BASE_WAIT_READABLE_H_
