// CloneVforkIntoCgroup: clone3(CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP), the spawner's
// child created directly inside a cgroup.
//
// Why: a process that moves itself into a cgroup (a write to cgroup.procs) takes the
// kernel's cgroup_threadgroup_rwsem for writing, whose first writer after a quiet spell
// waits for an RCU grace period: 7-25 ms on a 2-core VM, paid at every attempt's start
// (B1, B5). A child cloned into its cgroup takes that lock for reading only. glibc has no
// clone3 wrapper that switches stacks (the CLONE_VM child must not run on the parent's
// stack), so the system call is made here, in assembly, for x86-64; elsewhere the call
// fails with ENOSYS and the spawner enters the cgroup by cgroup.procs instead.
#ifndef MUSTER_LAUNCH_CLONE_INTO_CGROUP_H_
#define MUSTER_LAUNCH_CLONE_INTO_CGROUP_H_

#include <sys/types.h>

#include <cstddef>

namespace muster {

// Runs fn(arg) in a child that shares this process's memory, on [stack_low, stack_low +
// stack_size), inside the cgroup whose directory `cgroup_fd` is open; returns when the
// child has exec'd or exited (CLONE_VFORK). The child exits with fn's return value if fn
// returns. Returns the child's pid, or -1 with errno (ENOSYS: not x86-64 or no clone3;
// EINVAL/E2BIG: a kernel without CLONE_INTO_CGROUP; EAGAIN/ENOMEM: no process to be had).
pid_t CloneVforkIntoCgroup(int (*fn)(void*), void* arg, char* stack_low, size_t stack_size,
                           int cgroup_fd);

}  // namespace muster

#endif  // MUSTER_LAUNCH_CLONE_INTO_CGROUP_H_
