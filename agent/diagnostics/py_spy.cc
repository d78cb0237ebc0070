#include "agent/diagnostics/py_spy.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "launch/captured_run.h"
#include "launch/spawner.h"

namespace muster {
namespace {

// A dump is a few KB; a runaway output is cut here.
constexpr size_t kMaxPySpyOutput = 1 << 20;

// A py-spy dump of `target`, started; or the line that says why it could not start.
struct PySpyStart {
  std::optional<HelperChild> child;
  std::string error;
};

PySpyStart StartPySpy(const std::string& binary, pid_t target, bool native) {
  SpawnSpec spec{.argv = {binary, "dump", "--full-filenames", "--pid", std::to_string(target)}};
  if (native) spec.argv.push_back("--native");
  absl::StatusOr<HelperChild> child = StartHelper(std::move(spec), HelperOutput::kStdoutAndStderr);
  if (!child.ok()) return PySpyStart{.error = absl::StrCat("Error: ", child.status().message())};
  return PySpyStart{.child = std::move(*child)};
}

// Runs the started dumps to their end or `deadline` (those still running are killed);
// each one's output, with what went wrong appended as "Error: " lines.
std::vector<std::string> AwaitPySpies(std::vector<PySpyStart> started, absl::Time deadline) {
  std::vector<HelperChild> children;
  for (PySpyStart& s : started) {
    if (s.child) children.push_back(std::move(*s.child));
  }
  std::vector<HelperResult> results =
      AwaitHelpers(std::move(children), deadline,
                   AwaitOptions{.max_output = kMaxPySpyOutput, .kill_grace = absl::Seconds(2)});
  std::vector<std::string> texts;
  size_t next = 0;
  for (PySpyStart& s : started) {
    if (!s.child) {
      texts.push_back(std::move(s.error));
      continue;
    }
    HelperResult& r = results[next++];
    std::string text = std::move(r.out);
    if (!r.error.ok()) absl::StrAppend(&text, "\nError: ", r.error.message());
    // One stuck in the kernel (or held by a tracer) is left to the agent's reaper.
    if (!r.reaped) text += "\nError: py-spy did not exit";
    if (r.timed_out && !r.output_ended) text += "\nError: py-spy did not finish in time";
    texts.push_back(std::move(text));
  }
  return texts;
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
  std::vector<PySpyStart> started;
  for (pid_t pid : pids) started.push_back(StartPySpy(binary, pid, /*native=*/true));
  std::vector<std::string> texts = AwaitPySpies(std::move(started), deadline);
  std::vector<PySpyDump> out(pids.size());
  std::vector<size_t> again;  // --native is not supported everywhere (no libunwind there)
  for (size_t i = 0; i < pids.size(); ++i) {
    out[i].text = PySpyToFaulthandler(texts[i]);
    if (out[i].text.empty()) again.push_back(i);
  }
  std::vector<PySpyStart> retries;
  for (size_t i : again) {
    if (absl::Now() < deadline) retries.push_back(StartPySpy(binary, pids[i], /*native=*/false));
  }
  std::vector<std::string> retried = AwaitPySpies(std::move(retries), deadline);
  for (size_t k = 0; k < again.size(); ++k) {
    size_t i = again[k];
    if (k < retried.size()) out[i].text = PySpyToFaulthandler(retried[k]);
    if (out[i].text.empty()) out[i].error = PySpyError(k < retried.size() ? retried[k] : texts[i]);
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
