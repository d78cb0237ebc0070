// Pidfds: signals that cannot hit a recycled pid (docs/design.md §4.5), and the way a process
// hands a pidfd of itself to the watchdog.
//
// A pid names a process only until that process is reaped; afterwards the number may be
// given to any new process. A pidfd names one process for as long as it is open. Group
// signals (kill(-pgid)) have no pidfd form: they are safe only while the group leader is
// known not to be reaped (the caller reaps its own children, so it knows), or while
// PidfdUnreaped() says so for a process it did not start.
//
// Every function here is a thin system-call wrapper; the ones marked async-signal-safe
// allocate nothing and take no lock, so a clone/vfork child or a forked child of a
// threaded process may call them.
#ifndef MUSTER_LAUNCH_PIDFD_H_
#define MUSTER_LAUNCH_PIDFD_H_

#include <sys/types.h>

#include "base/unique_fd.h"

namespace muster {

// pidfd_open(pid, 0) with O_CLOEXEC semantics (pidfds are close-on-exec). -1 and errno on
// failure (ESRCH: no such process). Async-signal-safe.
int PidfdOpen(pid_t pid);

// pidfd_send_signal(fd, sig): 0, or -1 and errno (ESRCH: the process has exited).
// Async-signal-safe.
int PidfdSignal(int pidfd, int sig);

// The pid behind `pidfd` while its process is not reaped, from /proc/self/fdinfo ("Pid:");
// 0 once it has been reaped (or /proc is unreadable). While the answer is non-zero the pid
// (and any process group or session of that number) cannot belong to anyone else.
// Async-signal-safe.
pid_t PidfdUnreaped(int pidfd);

// Sends `pid` and, when pidfd >= 0, the pidfd itself (SCM_RIGHTS) as one datagram on a
// SOCK_SEQPACKET socket. 0 or -1 and errno. Async-signal-safe.
int SendPidAndPidfd(int socket, char op, pid_t pid, int pidfd);

// The receiving side: one datagram into `op`, `pid`, `pidfd` (-1 when none came along).
// Returns the bytes read (0: EOF), or -1 and errno. Async-signal-safe.
ssize_t ReceivePidAndPidfd(int socket, char* op, pid_t* pid, int* pidfd);

}  // namespace muster

#endif  // MUSTER_LAUNCH_PIDFD_H_
