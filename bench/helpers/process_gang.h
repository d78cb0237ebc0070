// ProcessGang: P forked copies of a benchmark client that start every phase together.
//
// Header-only so that storeload.cc still builds with one compiler command (storebench.py).
// The parent only coordinates. Before each phase every child writes one byte to a shared
// "ready" pipe ('R'; 'E' when it fails, from an atexit hook; 'D' once it has finished all
// phases); the parent waits for P of them and opens phase k by closing the write end of
// pipe k. EOF wakes every child blocked on that pipe at once, so it is a broadcast that no
// fast child can consume for a slow one (a semaphore token could be). Children report their
// results in a MAP_SHARED block set up before fork. A child that dies without a byte (a
// signal) is seen through its pidfd. Every wait has a deadline; the children die with the
// parent (PR_SET_PDEATHSIG), so a driver's timeout that kills the parent ends them too.
// Not thread-safe; one gang per process.
#ifndef MUSTER_BENCH_HELPERS_PROCESS_GANG_H_
#define MUSTER_BENCH_HELPERS_PROCESS_GANG_H_

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <vector>

class ProcessGang {
 public:
  // procs children, phases phases, slot_bytes of shared memory per child (zeroed).
  ProcessGang(int procs, int phases, size_t slot_bytes)
      : procs_(procs), phases_(phases), slot_bytes_((slot_bytes + 63) / 64 * 64) {
    shared_ = mmap(nullptr, slot_bytes_ * procs_, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared_ == MAP_FAILED) Die("mmap");
    if (pipe2(ready_, O_CLOEXEC) != 0) Die("pipe2");
    phase_.resize(phases_);
    for (auto& p : phase_) {
      if (pipe2(p.data(), O_CLOEXEC) != 0) Die("pipe2");
    }
  }
  ProcessGang(const ProcessGang&) = delete;
  ProcessGang& operator=(const ProcessGang&) = delete;

  void* slot(int i) const { return static_cast<char*>(shared_) + slot_bytes_ * i; }

  // Forks the children. Returns the child's index in a child, -1 in the parent.
  int Fork() {
    pid_t parent = getpid();
    fflush(nullptr);  // or every child would flush the parent's buffered output again
    for (int i = 0; i < procs_; i++) {
      pid_t pid = fork();
      if (pid < 0) Die("fork");
      if (pid == 0) {
        // Die with the parent; if it is already gone, getppid() no longer names it.
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) Die("prctl");
        if (getppid() != parent) _exit(1);
        close(ready_[0]);
        for (auto& p : phase_) close(p[1]);
        g_ready_w_ = ready_[1];
        if (atexit(ReportFailureAtExit) != 0) Die("atexit");
        return i;
      }
      int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
      if (fd < 0) Die("pidfd_open");
      kids_.push_back({pid, fd, false});
    }
    close(ready_[1]);
    for (auto& p : phase_) close(p[0]);
    return -1;
  }

  // Child: says it is ready for phase k and waits until the parent opens it.
  bool ChildAwait(int k, double timeout_s) {
    if (!WriteByte('R')) return false;
    double deadline = Now() + timeout_s;
    for (;;) {
      pollfd p{phase_[k][0], POLLIN, 0};
      int ms = static_cast<int>((deadline - Now()) * 1e3) + 1;
      if (ms <= 0) return false;
      int n = poll(&p, 1, ms);
      if (n < 0 && errno == EINTR) continue;  // a signal we do not handle: wait on
      if (n < 0) Die("poll");
      if (n == 0) return false;
      char b;
      ssize_t r = read(phase_[k][0], &b, 1);
      if (r == 0) return true;  // the parent closed the write end: phase k is open
      if (r < 0 && errno == EINTR) continue;
      return false;  // the parent never writes data into a phase pipe
    }
  }

  // Child: all phases done; the atexit hook stays quiet from now on.
  void ChildDone() {
    WriteByte('D');
    g_ready_w_ = -1;
  }

  // Parent: waits until every child is ready for phase k, then opens it.
  bool OpenPhase(int k, double timeout_s) {
    if (!Collect('R', timeout_s)) return false;
    close(phase_[k][1]);
    phase_[k][1] = -1;
    return true;
  }

  // Parent: waits for every child's 'D' and reaps them all. Returns false if any failed.
  bool Finish(double timeout_s) {
    bool ok = Collect('D', timeout_s);
    if (!ok) KillAll();
    for (auto& k : kids_) {
      int st = 0;
      while (waitpid(k.pid, &st, 0) < 0 && errno == EINTR) {
      }
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ok = false;
      close(k.pidfd);
    }
    kids_.clear();
    return ok;
  }

  void KillAll() {
    for (auto& k : kids_) kill(k.pid, SIGKILL);  // ESRCH: already gone, which is the aim
  }

  const char* error() const { return error_; }

 private:
  struct Kid {
    pid_t pid;
    int pidfd;
    bool exited;
  };

  static double Now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
  [[noreturn]] static void Die(const char* what) {
    fprintf(stderr, "process_gang: %s: %s\n", what, strerror(errno));
    exit(3);
  }
  static inline int g_ready_w_ = -1;
  static void ReportFailureAtExit() {
    if (g_ready_w_ >= 0) {
      char e = 'E';
      ssize_t w = write(g_ready_w_, &e, 1);
      (void)w;  // the parent may be gone; nothing left to tell
    }
  }
  bool WriteByte(char c) {
    for (;;) {
      ssize_t w = write(ready_[1], &c, 1);
      if (w == 1) return true;
      if (w < 0 && errno == EINTR) continue;
      return false;
    }
  }

  // Reads bytes from the ready pipe until P of them equal `want`. A child that exits
  // before sending 'D', an 'E', EOF or the deadline is a failure.
  bool Collect(char want, double timeout_s) {
    double deadline = Now() + timeout_s;
    int got = 0;
    while (got < procs_) {
      std::vector<pollfd> fds{{ready_[0], POLLIN, 0}};
      for (auto& k : kids_) fds.push_back({k.exited ? -1 : k.pidfd, POLLIN, 0});
      int ms = static_cast<int>((deadline - Now()) * 1e3) + 1;
      if (ms <= 0) return Fail("deadline passed waiting for the children");
      int n = poll(fds.data(), fds.size(), ms);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) Die("poll");
      if (n == 0) return Fail("deadline passed waiting for the children");
      if (fds[0].revents) {
        char buf[256];
        ssize_t r = read(ready_[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return Fail("every child has gone");
        for (ssize_t i = 0; i < r; i++) {
          if (buf[i] == 'E') return Fail("a child failed");
          if (buf[i] == want) got++;
        }
        continue;  // read the pipe dry before judging exits: 'D' precedes a clean exit
      }
      for (size_t i = 0; i < kids_.size(); i++) {
        if (!fds[i + 1].revents) continue;
        kids_[i].exited = true;
        if (want != 'D') return Fail("a child exited early");
      }
    }
    return true;
  }
  bool Fail(const char* why) {
    error_ = why;
    return false;
  }

  int procs_, phases_;
  size_t slot_bytes_;
  void* shared_ = nullptr;
  int ready_[2] = {-1, -1};
  std::vector<std::array<int, 2>> phase_;
  std::vector<Kid> kids_;
  const char* error_ = "";
};

#endif  // MUSTER_BENCH_HELPERS_PROCESS_GANG_H_
