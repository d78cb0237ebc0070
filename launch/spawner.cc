#include "launch/spawner.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/errno_status.h"
#include "base/exit_codes.h"
#include "base/status_macros.h"
#include "base/tsan.h"
#include "base/unique_fd.h"
#include "launch/clone_into_cgroup.h"
#include "launch/pidfd.h"
#include "launch/reaper.h"

namespace muster {
namespace {

constexpr size_t kChildStackSize = 64 * 1024;

// Everything the child reads, prepared by the parent before clone(). The child
// shares the parent's memory (CLONE_VM) and the parent is suspended until exec
// or _exit (CLONE_VFORK), so these stay valid and unmodified while the child
// uses them.
struct ChildArgs {
  const char* path;
  char* const* argv;
  char* const* envp;
  const std::pair<int, int>* fds;
  size_t fd_count;
  const char* cwd;
  bool new_session;
  int parent_death_signal;
  pid_t parent_pid;
  const cpu_set_t* cpus;
  const unsigned long* memory_nodes;  // MPOL_PREFERRED's node mask; nullptr: inherit
  unsigned long memory_node_bits;     // set_mempolicy's maxnode: the mask's bits + 1
  int error_pipe;                     // write end, close-on-exec
  int cgroup_procs_fd;
  int report_fd;
  int fd_limit;  // RLIMIT_NOFILE's soft limit: the fallback's bound when close_range fails
  bool new_cgroup_namespace;
};

[[noreturn]] void ChildFail(const ChildArgs* a, int err) {
  // A short write to a pipe of 4 bytes is atomic; there is nothing to do if it
  // fails.
  [[maybe_unused]] ssize_t n = write(a->error_pipe, &err, sizeof(err));
  _exit(127);
}

// Into the attempt's cgroup ("0": the writer itself), then tell the watchdog who we are.
// A watchdog that is gone is being restarted; the agent re-sends its workers then.
void EnterContainment(const ChildArgs* a) {
  if (a->cgroup_procs_fd >= 0 && write(a->cgroup_procs_fd, "0", 1) != 1) ChildFail(a, errno);
  // Rooted at the cgroup just entered: with nsdelegate the kernel keeps the worker and all it
  // starts in that cgroup's subtree (launch/cgroup.h).
  if (a->new_cgroup_namespace && unshare(CLONE_NEWCGROUP) != 0) ChildFail(a, errno);
  if (a->report_fd >= 0) {
    int self = PidfdOpen(getpid());
    SendPidAndPidfd(a->report_fd, '+', getpid(), self);
    if (self >= 0) close(self);
  }
}

// Every descriptor above 2 becomes close-on-exec: the agent's own are already, but those it
// inherited from whoever started it (a shell's fd 251, a CI runner's pipes) are not, and a
// worker holding a caller's pipe open keeps that caller waiting for EOF. The wiring that
// follows (dup2, or clearing the flag for from == to) gives back exactly the spec's fds.
// Only the child's copy of the fd table changes (no CLONE_FILES).
void MarkFdsCloseOnExec(const ChildArgs* a) {
  if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  // ENOSYS (before Linux 5.9) or EINVAL (the flag came in 5.11): one fd at a time, up to
  // the descriptor limit the parent read. EBADF for the fds that are not open is expected.
  for (int fd = 3; fd < a->fd_limit; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// Runs in the child. Only async-signal-safe calls: no malloc, no locks, no C++
// exceptions.
int ChildMain(void* arg) {
  const ChildArgs* a = static_cast<const ChildArgs*>(arg);
  // Dispositions: the agent ignores SIGPIPE and ignored dispositions survive
  // execve, so reset every signal to default (SIGKILL/SIGSTOP fail with EINVAL,
  // which is fine).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
  EnterContainment(a);
  if (a->new_session && setsid() < 0) ChildFail(a, errno);
  if (a->parent_death_signal != 0) {
    if (prctl(PR_SET_PDEATHSIG, a->parent_death_signal) != 0) ChildFail(a, errno);
    // The agent may have died between clone() and prctl(): then nobody would
    // ever send the death signal, so exit now rather than run unsupervised.
    if (getppid() != a->parent_pid) _exit(exit_code::ForSignal(a->parent_death_signal));
  }
  MarkFdsCloseOnExec(a);
  for (size_t i = 0; i < a->fd_count; ++i) {
    int from = a->fds[i].first, to = a->fds[i].second;
    if (from == to) {
      // dup2 to itself keeps FD_CLOEXEC; clear it so the fd survives exec.
      int flags = fcntl(from, F_GETFD);
      if (flags < 0 || fcntl(from, F_SETFD, flags & ~FD_CLOEXEC) < 0) ChildFail(a, errno);
    } else if (dup2(from, to) < 0) {
      ChildFail(a, errno);
    }
  }
  if (a->cwd != nullptr && chdir(a->cwd) != 0) ChildFail(a, errno);
  if (a->cpus != nullptr && sched_setaffinity(0, sizeof(cpu_set_t), a->cpus) != 0) {
    ChildFail(a, errno);
  }
  // The policy is the calling task's (CLONE_VM shares memory, not policy) and survives
  // execve: the worker and everything it starts prefer the node.
  if (a->memory_nodes != nullptr &&
      syscall(SYS_set_mempolicy, MPOL_PREFERRED, a->memory_nodes, a->memory_node_bits) != 0) {
    ChildFail(a, errno);
  }
  sigset_t empty;
  sigemptyset(&empty);
  if (sigprocmask(SIG_SETMASK, &empty, nullptr) != 0) ChildFail(a, errno);
  execve(a->path, a->argv, a->envp);
  ChildFail(a, errno);
}

// The child's stack: one per spawning thread, mapped once and reused. The child has exec'd
// or exited when clone() returns (CLONE_VFORK), so the next spawn may use it again; a fresh
// mapping per spawn cost an mmap, a munmap and the child's page faults on it (B7). Never
// unmapped: one per thread that spawns (the agent's loop thread).
[[maybe_unused]] absl::StatusOr<char*> ChildStackTop() {  // unused in TSan builds
  thread_local void* stack = nullptr;
  if (stack == nullptr) {
    void* mapped = mmap(nullptr, kChildStackSize, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (mapped == MAP_FAILED) return ErrnoStatus("mmap(child stack)", errno);
    stack = mapped;
  }
  return static_cast<char*>(stack) + kChildStackSize;
}

// RLIMIT_NOFILE's soft limit: no fd at or above it can be open.
int FdLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
      limit.rlim_cur > (1U << 20)) {
    return 1 << 20;  // the kernel's default nr_open
  }
  return static_cast<int>(limit.rlim_cur);
}

// clone()/fork() failed. EAGAIN and ENOMEM pass (another job's processes exit, memory is
// freed): Unavailable / ResourceExhausted, which the agent treats as a transient failure.
absl::Status CloneFailure(const char* call, int err) {
  if (err == EAGAIN) {
    return absl::UnavailableError(absl::StrCat(
        call, " failed: ", strerror(err),
        " (process limit reached: the pids cgroup's pids.max or ulimit -u); transient"));
  }
  if (err == ENOMEM) {
    return absl::ResourceExhaustedError(
        absl::StrCat(call, " failed: ", strerror(err), " (out of memory); transient"));
  }
  return ErrnoStatus(call, err);
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Starts the child (ChildMain(&args)); returns its pid once it has exec'd or failed.
absl::StatusOr<pid_t> StartChild(const SpawnSpec& spec, ChildArgs& args) {
#ifdef MUSTER_TSAN
  // TSan's clone() interceptor (LLVM 14) treats every clone as a fork and resets its
  // runtime state in the child, which CLONE_VM shares with us: it aborts on a CHECK. TSan
  // turns vfork() into fork() for the same reason; so do TSan builds here. The pipe below
  // still tells exec from failure.
  pid_t pid = fork();
  if (pid == 0) {
    // The child only execs; TSan would check it against the history of threads that the
    // fork did not copy.
    __tsan_ignore_thread_begin();
    ChildMain(&args);
  }
  if (pid < 0) return CloneFailure("fork", errno);
  return pid;
#else
  ASSIGN_OR_RETURN(char* stack_top, ChildStackTop());
  pid_t pid = -1;
  // Straight into the cgroup where the kernel can (clone_into_cgroup.h: no cgroup.procs
  // write, whose lock costs a grace period); a kernel or CPU without it is asked once.
  static std::atomic<bool> into_cgroup_works{true};
  if (spec.cgroup_dir_fd >= 0 && into_cgroup_works.load(std::memory_order_relaxed)) {
    ChildArgs direct = args;
    direct.cgroup_procs_fd = -1;  // already there
    pid = CloneVforkIntoCgroup(ChildMain, &direct, stack_top - kChildStackSize, kChildStackSize,
                               spec.cgroup_dir_fd);
    if (pid < 0 && errno != ENOSYS && errno != EINVAL && errno != E2BIG) {
      return CloneFailure("fork (clone)", errno);
    }
    if (pid < 0) into_cgroup_works.store(false, std::memory_order_relaxed);
  }
  if (pid < 0) pid = clone(ChildMain, stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  if (pid < 0) return CloneFailure("fork (clone)", errno);
  return pid;
#endif
}

}  // namespace

absl::StatusOr<std::string> ResolveExecutable(const std::string& command,
                                              const std::string& path_env) {
  if (command.empty()) return absl::InvalidArgumentError("empty command");
  if (command.find('/') != std::string::npos) {
    if (access(command.c_str(), F_OK) != 0) {
      return absl::NotFoundError(absl::StrCat(command, ": no such file"));
    }
    return command;
  }
  bool found_not_executable = false;
  for (absl::string_view dir : absl::StrSplit(path_env.empty() ? "/usr/bin:/bin" : path_env, ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", command);
    if (!IsExecutableFile(candidate)) continue;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    found_not_executable = true;
  }
  if (found_not_executable) {
    return absl::PermissionDeniedError(absl::StrCat(command, ": found in PATH but not executable"));
  }
  return absl::NotFoundError(absl::StrCat(command, ": command not found in PATH"));
}

int ExecFailureExitCode(const absl::Status& status) {
  return absl::IsNotFound(status) ? exit_code::kNotFound : exit_code::kNotExecutable;
}

bool IsTransientSpawnFailure(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsResourceExhausted(status);
}

int SpawnFailureExitCode(const absl::Status& status) {
  return IsTransientSpawnFailure(status) ? exit_code::kTransient : ExecFailureExitCode(status);
}

absl::StatusOr<pid_t> Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("Spawn: empty argv");
  std::string path_env = "/usr/bin:/bin";
  for (const std::string& kv : spec.env) {
    if (kv.rfind("PATH=", 0) == 0) path_env = kv.substr(5);
  }
  absl::StatusOr<std::string> path = ResolveExecutable(spec.argv[0], path_env);
  if (!path.ok()) return path.status();

  std::vector<char*> argv, envp;
  for (const std::string& s : spec.argv) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  for (const std::string& s : spec.env) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : spec.cpus) CPU_SET(cpu, &cpus);
  constexpr int kNodeMaskBits = 1024;  // the kernel's largest MAX_NUMNODES (NODES_SHIFT 10)
  constexpr int kWordBits = 8 * sizeof(unsigned long);
  unsigned long memory_nodes[kNodeMaskBits / kWordBits] = {};
  int node = spec.preferred_memory_node;
  if (node >= kNodeMaskBits) {
    return absl::InvalidArgumentError(absl::StrCat("NUMA node ", node, " is out of range"));
  }
  if (node >= 0) memory_nodes[node / kWordBits] |= 1UL << (node % kWordBits);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", errno);
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);

  ChildArgs args{path->c_str(),
                 argv.data(),
                 envp.data(),
                 spec.fds.data(),
                 spec.fds.size(),
                 spec.cwd.empty() ? nullptr : spec.cwd.c_str(),
                 spec.new_session,
                 spec.parent_death_signal,
                 getpid(),
                 spec.cpus.empty() ? nullptr : &cpus,
                 node >= 0 ? memory_nodes : nullptr,
                 kNodeMaskBits + 1,
                 write_end.get(),
                 spec.cgroup_procs_fd,
                 spec.report_fd,
                 FdLimit(),
                 spec.new_cgroup_namespace};

  ASSIGN_OR_RETURN(pid_t pid, StartChild(spec, args));
  write_end.reset();

  int child_errno = 0;
  ssize_t n;
  do {
    n = read(read_end.get(), &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  if (n == sizeof(child_errno)) {
    // The child _exit'ed before exec; reap it here so the agent's SIGCHLD
    // handling never sees a pid it did not hear about.
    // It has exited (the pipe said so): at once, unless a ptrace tracer holds its zombie;
    // then the agent's SIGCHLD handling reaps it later.
    ReapChildWithin(pid, absl::Seconds(1));
    std::string what = absl::StrCat("cannot execute ", *path);
    if (child_errno == ENOENT) return absl::NotFoundError(absl::StrCat(what, ": no such file"));
    if (child_errno == EACCES || child_errno == ENOEXEC || child_errno == EISDIR) {
      return absl::PermissionDeniedError(
          absl::StrCat(what, ": ", strerror(child_errno), " (is it executable?)"));
    }
    return ErrnoStatus(what, child_errno);
  }
  return pid;
}

}  // namespace muster
