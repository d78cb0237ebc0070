// PySpy: the stacks of workers whose stack hook (agent/diagnostics/stack_hook.h) did not answer,
// read from outside by PyPI's py-spy (a static binary) when it is on the agent's PATH (issue 17
// item 1, docs/guides/hangs-and-stacks.md "Stacks"). py-spy reads the interpreter's memory through
// ptrace, so it needs no cooperation from the process: it answers for a rank whose signal is
// blocked, whose handler was replaced, that runs with -I/-S or with --no-stack-hook. With --native
// it adds the C frames (libc's sleep, a CUDA call) between the Python ones.
//
// Plain functions; thread-safe. PySpyDumps spawns children: the agent's reaper may reap
// them first, so an exit status is never relied on (py-spy's output says whether it
// worked).
#ifndef MUSTER_AGENT_PY_SPY_H_
#define MUSTER_AGENT_PY_SPY_H_

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"

namespace muster {

// py-spy in `path_env` (a PATH value); empty when absent.
std::string FindPySpy(const std::string& path_env);

// Whether `pid` runs a Python interpreter: its executable is named python* or it maps a
// libpython. False when /proc cannot tell (the process ended).
bool IsPythonProcess(pid_t pid);

// One pid's dump: faulthandler-style text (PySpyToFaulthandler) or why there is none.
struct PySpyDump {
  std::string text;
  std::string error;
};

// Runs `py-spy dump --native --full-filenames --pid P` for every pid at once, each
// killed at `deadline`. A pid whose --native dump fails is dumped again without --native
// while time is left. Same order as `pids`.
std::vector<PySpyDump> PySpyDumps(const std::string& binary, const std::vector<pid_t>& pids,
                                  absl::Time deadline);

// py-spy's text ("Thread 12 (idle): \"MainThread\"" then "    f (file.py:3)" per frame,
// native ones "    sleep (libc.so.6)") in faulthandler's form, so that the stack report
// (agent/diagnostics/stack_report.h) reads both alike. Native frames below the outermost Python
// frame (the interpreter's own start-up) and bare addresses are left out. The first line says the
// stack came from py-spy. Empty when `out` holds no thread.
std::string PySpyToFaulthandler(std::string_view out);

}  // namespace muster

#endif  // MUSTER_AGENT_PY_SPY_H_
