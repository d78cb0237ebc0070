#include "agent/diagnostics/py_spy.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/unique_fd.h"
#include "launch/reaper.h"
#include "launch/spawner.h"

namespace muster {
namespace {

// A dump is a few KB; a runaway output is cut here.
constexpr size_t kMaxPySpyOutput = 1 << 20;

// One running py-spy: its output so far and whether it has closed it (ended).
struct PySpyChild {
  pid_t pid = -1;
  UniqueFd out;
  std::string text;
  bool ended = false;
};

PySpyChild StartPySpy(const std::string& binary, pid_t target, bool native) {
  PySpyChild c;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    c.text = absl::StrCat("Error: pipe2: ", strerror(errno));
    c.ended = true;
    return c;
  }
  c.out = UniqueFd(fds[0]);
  UniqueFd write_end(fds[1]);
  SpawnSpec spec{.argv = {binary, "dump", "--full-filenames", "--pid", std::to_string(target)}};
  if (native) spec.argv.push_back("--native");
  spec.fds = {{write_end.get(), 1}, {write_end.get(), 2}};
  absl::StatusOr<pid_t> pid = Spawn(spec);
  if (!pid.ok()) {
    c.text = absl::StrCat("Error: ", pid.status().message());
    c.ended = true;
    return c;
  }
  c.pid = *pid;
  return c;
}

// Reads what the ready children wrote; marks those that closed their output as ended.
void ReadReady(const std::vector<pollfd>& polled, const std::vector<PySpyChild*>& owners) {
  for (size_t i = 0; i < polled.size(); ++i) {
    if (polled[i].revents == 0) continue;
    char buf[8192];
    ssize_t got = read(polled[i].fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;  // look again on the next round
    if (got <= 0 || owners[i]->text.size() >= kMaxPySpyOutput) {
      owners[i]->ended = true;  // EOF: py-spy exited (or the output is too long to want)
    } else {
      owners[i]->text.append(buf, static_cast<size_t>(got));
    }
  }
}

// Kills the children still running and collects every child.
void EndPySpies(std::vector<PySpyChild>& children) {
  for (PySpyChild& c : children) {
    if (c.pid <= 0) continue;
    // A child whose output is still open is alive (and not yet reaped: no pid reuse).
    if (!c.ended && kill(c.pid, SIGKILL) != 0 && errno != ESRCH) {
      c.text += absl::StrCat("\nError: kill: ", strerror(errno));
    }
    // ECHILD: the agent's reaper took it first; its output already said how it went. One
    // stuck in the kernel (or held by a tracer) is left to the agent's reaper after 2 s.
    if (!ReapChildWithin(c.pid, absl::Seconds(2))) c.text += "\nError: py-spy did not exit";
    if (!c.ended) c.text += "\nError: py-spy did not finish in time";
  }
}

// Reads every child's output until it ends or `deadline`; kills those still running.
void AwaitPySpies(std::vector<PySpyChild>& children, absl::Time deadline) {
  for (;;) {
    std::vector<pollfd> polled;
    std::vector<PySpyChild*> owners;
    for (PySpyChild& c : children) {
      if (c.ended) continue;
      polled.push_back({.fd = c.out.get(), .events = POLLIN, .revents = 0});
      owners.push_back(&c);
    }
    int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (polled.empty() || left <= 0) break;
    int n = poll(polled.data(), polled.size(), static_cast<int>(left) + 1);
    if (n < 0 && errno == EINTR) continue;  // a signal arrived; look again
    if (n < 0) break;                       // cannot wait: what came so far is the answer
    ReadReady(polled, owners);
  }
  EndPySpies(children);
}

// py-spy's error line ("Error: Failed to find python version from target process"),
// without the backtrace it prints after it.
std::string PySpyError(const std::string& out) {
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::ConsumePrefix(&line, "Error: ")) return std::string(line);
  }
  std::string first = out.substr(0, out.find('\n'));
  return first.empty() ? "py-spy printed nothing" : first;
}

// "    f (/x/train.py:57)" -> function, file, line (0 and the library for a native frame);
// false for a bare address or a line that is no frame.
bool ParsePySpyFrame(absl::string_view line, std::string* function, std::string* where,
                     int* lineno) {
  line = absl::StripAsciiWhitespace(line);
  size_t open = line.rfind(" (");
  if (open == absl::string_view::npos || !absl::EndsWith(line, ")")) return false;
  absl::string_view name = line.substr(0, open);
  absl::string_view inside = line.substr(open + 2, line.size() - open - 3);
  if (name.empty() || absl::StartsWith(name, "0x")) return false;
  *function = std::string(name);
  *lineno = 0;
  size_t colon = inside.rfind(':');
  if (colon != absl::string_view::npos && absl::SimpleAtoi(inside.substr(colon + 1), lineno)) {
    inside = inside.substr(0, colon);
  }
  *where = std::string(inside);
  return true;
}

}  // namespace

std::string FindPySpy(const std::string& path_env) {
  absl::StatusOr<std::string> found = ResolveExecutable("py-spy", path_env);
  return found.ok() ? *found : "";
}

bool IsPythonProcess(pid_t pid) {
  char exe[PATH_MAX];
  std::string link = absl::StrCat("/proc/", pid, "/exe");
  ssize_t n = readlink(link.c_str(), exe, sizeof(exe) - 1);
  if (n > 0) {
    absl::string_view path(exe, static_cast<size_t>(n));
    if (absl::StartsWith(path.substr(path.rfind('/') + 1), "python")) return true;
  }
  // An embedding program (uwsgi, a C++ trainer with pybind11) maps libpython.
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/libpython") != std::string::npos) return true;
  }
  return false;
}

std::vector<PySpyDump> PySpyDumps(const std::string& binary, const std::vector<pid_t>& pids,
                                  absl::Time deadline) {
  std::vector<PySpyChild> children;
  for (pid_t pid : pids) children.push_back(StartPySpy(binary, pid, /*native=*/true));
  AwaitPySpies(children, deadline);
  std::vector<PySpyDump> out(pids.size());
  std::vector<size_t> again;  // --native is not supported everywhere (no libunwind there)
  for (size_t i = 0; i < pids.size(); ++i) {
    out[i].text = PySpyToFaulthandler(children[i].text);
    if (out[i].text.empty()) again.push_back(i);
  }
  std::vector<PySpyChild> retries;
  for (size_t i : again) {
    if (absl::Now() < deadline) retries.push_back(StartPySpy(binary, pids[i], /*native=*/false));
  }
  AwaitPySpies(retries, deadline);
  for (size_t k = 0; k < again.size(); ++k) {
    size_t i = again[k];
    if (k < retries.size()) out[i].text = PySpyToFaulthandler(retries[k].text);
    if (out[i].text.empty()) {
      out[i].error = PySpyError(k < retries.size() ? retries[k].text : children[i].text);
    }
  }
  return out;
}

std::string PySpyToFaulthandler(std::string_view out) {
  std::string text;
  std::string frames;   // the current thread's, up to its outermost Python frame
  std::string pending;  // native frames after the last Python one
  bool in_thread = false;
  auto end_thread = [&] {
    if (in_thread) absl::StrAppend(&text, frames, "\n");
    frames.clear();
    pending.clear();
  };
  for (absl::string_view line : absl::StrSplit(absl::string_view(out.data(), out.size()), '\n')) {
    if (absl::ConsumePrefix(&line, "Thread ")) {
      end_thread();
      in_thread = true;
      std::string id(line.substr(0, line.find(' ')));
      // py-spy prints a thread id in decimal or, for a pthread id, in hex ("0x7F...").
      unsigned long tid = std::strtoul(id.c_str(), nullptr, 0);  // NOLINT(runtime/int)
      char head[64];
      std::snprintf(head, sizeof head, "Thread 0x%016lx (most recent call first):\n", tid);
      if (text.empty()) text = "py-spy dump (the stack hook did not answer)\n";
      frames = head;
      continue;
    }
    std::string function, where;
    int lineno = 0;
    if (!in_thread || !ParsePySpyFrame(line, &function, &where, &lineno)) continue;
    std::string frame =
        absl::StrCat("  File \"", where, "\", line ", lineno, " in ", function, "\n");
    if (lineno == 0) {  // native: kept only once a Python frame follows (not start-up's)
      pending += frame;
    } else {
      absl::StrAppend(&frames, pending, frame);
      pending.clear();
    }
  }
  end_thread();
  return text;
}

}  // namespace muster
