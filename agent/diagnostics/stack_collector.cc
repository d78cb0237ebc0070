#include "agent/diagnostics/stack_collector.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/diagnostics/py_spy.h"
#include "agent/diagnostics/stack_hook.h"
#include "base/duration.h"
#include "base/unique_fd.h"
#include "launch/pidfd.h"

namespace muster {
namespace {

// faulthandler writes a dump in one go from its signal handler; a file that has not grown
// for this long after growing holds a whole dump.
constexpr absl::Duration kQuiet = absl::Milliseconds(40);

// One signalled worker whose dump is awaited.
struct Awaited {
  rdzv::RankStack stack;
  std::string path;
  off_t start = 0;  // the file's size before the signal: the dump follows
  off_t seen = 0;   // its size when last looked at
  absl::Time grew = absl::InfinitePast();
  bool done = false;
  bool running = false;  // alive when asked: py-spy may read it
};

off_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// The file's bytes from `from` to its end, at most `max` ("" when unreadable).
std::string ReadFrom(const std::string& path, off_t from, size_t max = 4 << 20) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return "";
  std::string out;
  char buf[16384];
  max = std::min(max, sizeof buf * 256);
  for (off_t at = from;;) {
    ssize_t n = pread(fd.get(), buf, std::min(sizeof buf, max - out.size()), at);
    if (n < 0 && errno == EINTR) continue;  // a signal arrived; nothing was read
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
    if (out.size() >= max) break;  // bounded: a dump is a few KB
  }
  return out;
}

bool HookReady(const std::string& path) {
  return ReadFrom(path, 0, sizeof(kStackHookReady) - 1) == kStackHookReady;
}

// Whether `pid` has a handler for `sig` now (/proc/<pid>/status, SigCgt). A Python worker
// that is exiting has unregistered faulthandler: the signal would end it (found by hang
// detection sampling a job's last second). False when unreadable.
bool SignalCaught(pid_t pid, int sig) {
  std::string status = ReadFrom(absl::StrCat("/proc/", pid, "/status"), 0, 8192);
  size_t at = status.find("\nSigCgt:");
  if (at == std::string::npos) return false;
  uint64_t mask = 0;
  if (sscanf(status.c_str() + at + 8, "%" SCNx64, &mask) != 1) return false;
  return sig >= 1 && sig <= 64 && (mask >> (sig - 1)) & 1;
}

// Signals `w` if its hook is in place; otherwise (or when signalling fails) says why in
// stack.unavailable. Loop thread: `w` is not reaped while this runs.
Awaited SignalIfHooked(const WorkerView& w, bool hook) {
  Awaited a{.stack = {.rank = w.placement.rank,
                      .local_rank = w.placement.local_rank,
                      .pid = static_cast<int>(w.pid)},
            .path = StackFile(w.dir, w.pid)};
  if (w.status || w.pid <= 0) {
    a.stack.unavailable = "not running";
    return a;
  }
  a.running = true;
  if (!hook) {
    a.stack.unavailable = "the stack hook is off (--no-stack-hook)";
    return a;
  }
  if (!HookReady(a.path) || !IsPythonProcess(w.pid)) {
    // No pid in the reason: ranks with the same reason are listed as one group.
    a.stack.unavailable = "no stack hook (Python run with -I, -E or -S, or still starting)";
    return a;
  }
  if (!SignalCaught(w.pid, StackSignal())) {
    a.stack.unavailable = "its stack hook is gone (exiting, or the program replaced the handler)";
    return a;
  }
  // A hooked worker that exec'd another program keeps its pid and file, not the handler:
  // the signal would end it. ReadFromOutside names it "not a Python process".
  a.start = a.seen = FileSize(a.path);
  UniqueFd pidfd(PidfdOpen(w.pid));
  if (!pidfd.valid() || PidfdSignal(pidfd.get(), StackSignal()) != 0) {
    a.stack.unavailable = absl::StrCat("cannot signal it: ", strerror(errno));
  }
  return a;
}

// Looks at every awaited file; returns when the next one may be complete (InfiniteFuture
// when none has grown yet).
absl::Time LookAgain(std::vector<Awaited*>& pending, absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (Awaited* a : pending) {
    off_t size = FileSize(a->path);
    if (size > a->seen) {
      a->seen = size;
      a->grew = now;
    }
    if (a->seen > a->start && now - a->grew >= kQuiet) a->done = true;
    if (!a->done && a->seen > a->start) next = std::min(next, a->grew + kQuiet);
  }
  std::erase_if(pending, [](const Awaited* a) { return a->done; });
  return next;
}

// Each signalled worker's dump, or why there is none.
void ReadDumps(std::vector<Awaited>& all) {
  for (Awaited& a : all) {
    if (!a.stack.unavailable.empty()) continue;
    a.stack.text = ReadFrom(a.path, a.start);
    if (a.stack.text.empty()) {
      a.stack.unavailable =
          "no dump from the stack hook in time (the signal is blocked or its handler "
          "replaced, or the process is stopped or stuck in the kernel)";
    }
  }
}

// Waits (inotify on the workers' directories, no polling) until every dump is complete or
// `deadline`.
void AwaitDumps(std::vector<Awaited>& all, absl::Time deadline) {
  std::vector<Awaited*> pending;
  for (Awaited& a : all) {
    if (a.stack.unavailable.empty()) pending.push_back(&a);
  }
  UniqueFd inotify(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  for (Awaited* a : pending) {
    std::string dir = a->path.substr(0, a->path.rfind('/'));
    if (inotify.valid()) inotify_add_watch(inotify.get(), dir.c_str(), IN_MODIFY);
  }
  while (!pending.empty()) {
    absl::Time now = absl::Now();
    absl::Time next = std::min(LookAgain(pending, now), deadline);
    if (pending.empty() || now >= deadline) break;
    // Without inotify (out of watches): look again every 10 ms.
    absl::Duration wait =
        inotify.valid() ? next - now : std::min(next - now, absl::Milliseconds(10));
    pollfd p{.fd = inotify.get(), .events = POLLIN, .revents = 0};
    int ready = poll(&p, inotify.valid() ? 1 : 0,
                     static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(wait) + 1)));
    if (ready < 0 && errno != EINTR) break;  // EINTR: look again
    char events[4096];
    while (ready > 0 && read(inotify.get(), events, sizeof events) > 0) {
    }
  }
}

// The running workers the hook gave no stack for: "not a Python process", or py-spy's
// stack (agent/diagnostics/py_spy.h), or the hook's reason with what py-spy said or how to get it.
void ReadFromOutside(std::vector<Awaited>& all, const std::string& py_spy, absl::Time deadline) {
  std::vector<Awaited*> spied;
  for (Awaited& a : all) {
    if (a.stack.unavailable.empty() || !a.running) continue;
    if (!IsPythonProcess(a.stack.pid)) {
      a.stack.unavailable = "not a Python process";
    } else if (py_spy.empty()) {
      a.stack.unavailable += "; put py-spy on the agent's PATH to read it from outside";
    } else {
      spied.push_back(&a);
    }
  }
  if (spied.empty()) return;
  std::vector<pid_t> pids;
  for (const Awaited* a : spied) pids.push_back(a->stack.pid);
  std::vector<PySpyDump> dumps = PySpyDumps(py_spy, pids, deadline);
  for (size_t i = 0; i < spied.size(); ++i) {
    if (!dumps[i].text.empty()) {
      spied[i]->stack.text = std::move(dumps[i].text);
      spied[i]->stack.unavailable.clear();
    } else {
      absl::StrAppend(&spied[i]->stack.unavailable, "; py-spy: ", dumps[i].error);
    }
  }
}

}  // namespace

void StackCollector::Collect(absl::Duration timeout, Done done) {
  absl::Time deadline = absl::Now() + timeout;
  // With py-spy, the hook gets the first half: a dump takes milliseconds, and py-spy needs
  // the rest for the ranks that gave none.
  absl::Time hook_deadline = options_.py_spy.empty() ? deadline : absl::Now() + timeout / 2;
  std::vector<Awaited> all;
  for (const WorkerView& w : launcher_->Workers()) all.push_back(SignalIfHooked(w, options_.hook));
  waiters_.Start([all = std::move(all), hook_deadline, deadline, py_spy = options_.py_spy,
                  done = std::move(done)]() mutable {
    AwaitDumps(all, hook_deadline);
    ReadDumps(all);
    ReadFromOutside(all, py_spy, deadline);
    std::vector<rdzv::RankStack> out;
    for (Awaited& a : all) out.push_back(std::move(a.stack));
    std::sort(out.begin(), out.end(),
              [](const rdzv::RankStack& a, const rdzv::RankStack& b) { return a.rank < b.rank; });
    done(std::move(out));
  });
}

}  // namespace muster
