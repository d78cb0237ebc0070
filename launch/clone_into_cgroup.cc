#include "launch/clone_into_cgroup.h"

#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstdint>

namespace muster {

#if defined(__x86_64__) && defined(CLONE_INTO_CGROUP) && defined(SYS_clone3)

pid_t CloneVforkIntoCgroup(int (*fn)(void*), void* arg, char* stack_low, size_t stack_size,
                           int cgroup_fd) {
  clone_args args{};
  args.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<uint64_t>(stack_low);
  args.stack_size = stack_size;
  args.cgroup = static_cast<uint64_t>(cgroup_fd);
  // The child starts after `syscall` with rax = 0 and its stack pointer at the top of the
  // new stack (16-byte aligned; `call` then leaves it as a function entry expects), every
  // other register as the parent had it: fn and arg in callee-saved r12/r13 survive. It
  // never comes back to C code that would use the parent's frame.
  register int (*child_fn)(void*) asm("r12") = fn;
  register void* child_arg asm("r13") = arg;
  long ret;
  asm volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      "xorl %%ebp, %%ebp\n\t"  // the outermost frame of the child
      "movq %%r13, %%rdi\n\t"
      "callq *%%r12\n\t"
      "movl %%eax, %%edi\n\t"
      "movl %[exit_nr], %%eax\n\t"
      "syscall\n\t"
      "hlt\n\t"
      "1:\n\t"
      : "=a"(ret)
      : "0"(static_cast<long>(SYS_clone3)), "D"(&args), "S"(sizeof(args)), "r"(child_fn),
        "r"(child_arg), [exit_nr] "i"(SYS_exit)
      : "rcx", "r11", "memory", "cc");
  if (ret < 0) {
    errno = static_cast<int>(-ret);
    return -1;
  }
  return static_cast<pid_t>(ret);
}

#else

pid_t CloneVforkIntoCgroup(int (*)(void*), void*, char*, size_t, int) {
  errno = ENOSYS;
  return -1;
}

#endif

}  // namespace muster
