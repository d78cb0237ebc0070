#include "agent/diagnostics/stack_hook.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/unique_fd.h"

namespace muster {
namespace {

// Never raises: a hook that fails leaves the worker as it was, and `muster stacks` says
// "not available". chain=True only over a handler someone installed: chaining to SIG_DFL
// would re-raise the signal with its default action, which ends the process.
constexpr char kSiteCustomize[] =
    R"PY(# Written by muster (docs/guides/hangs-and-stacks.md "Stacks"). On signal MUSTER_STACKS_SIGNAL, faulthandler
# writes every thread's Python stack to MUSTER_STACKS_DIR/stacks-<pid>.txt from its C
# signal handler (no Python code runs); `muster stacks` signals and reads it. Only the
# worker's own process registers (MUSTER_STACKS_OWNER, its pid, tells its children).
# Then the next sitecustomize on sys.path runs, as if this one were not there.
def _muster_stacks_hook():
    import os
    where, signum = os.environ.get("MUSTER_STACKS_DIR"), os.environ.get("MUSTER_STACKS_SIGNAL")
    if not where or not signum:
        return None
    # Only the worker registers, not the Python programs it starts (DataLoader workers,
    # subprocesses), which would each leave a file. The same pid again: it exec'd Python.
    owner = os.environ.get("MUSTER_STACKS_OWNER")
    if owner and owner != str(os.getpid()):
        return None
    os.environ["MUSTER_STACKS_OWNER"] = str(os.getpid())
    try:
        import _signal  # not `signal`: its enum import costs more than the rest together
        import faulthandler
        signum = int(signum)
        previous = _signal.getsignal(signum)
        f = open(os.path.join(where, "stacks-%d.txt" % os.getpid()), "a")
        faulthandler.register(signum, file=f, all_threads=True, chain=callable(previous))
        f.write("muster-stacks-ready\n")
        f.flush()
        return f  # faulthandler holds the descriptor, not the file object: keep it open
    except Exception:
        return None


def _muster_next_sitecustomize():
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    # importlib's PathFinder, from sys.meta_path: importing importlib costs ~10 ms (warnings).
    finders = [f for f in sys.meta_path if getattr(f, "__name__", "") == "PathFinder"]
    spec = finders[0].find_spec("sitecustomize", rest) if finders else None
    if spec is None or spec.loader is None:
        return
    module = type(sys)("sitecustomize")
    module.__spec__, module.__loader__, module.__file__ = spec, spec.loader, spec.origin
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_muster_stacks_file = _muster_stacks_hook()
# Run by a warm rank (launch/warm_template.py) the rest ran in its template already.
if __name__ == "sitecustomize":
    _muster_next_sitecustomize()
)PY";

}  // namespace

int StackSignal() { return SIGRTMIN + 3; }

std::string StackHookDir(const std::string& run_dir) { return run_dir + "/python"; }

std::string StackFile(const std::string& worker_dir, pid_t pid) {
  return absl::StrCat(worker_dir, "/stacks-", pid, ".txt");
}

absl::Status WriteStackHook(const std::string& run_dir) {
  std::string dir = StackHookDir(run_dir);
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("mkdir " + dir, errno);
  }
  std::string path = dir + "/sitecustomize.py";
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus("open " + path, errno);
  const char* p = kSiteCustomize;
  size_t left = sizeof(kSiteCustomize) - 1;
  while (left > 0) {
    ssize_t n = write(fd.get(), p, left);
    if (n < 0 && errno == EINTR) continue;  // a signal arrived; nothing was written
    if (n < 0) return ErrnoStatus("write " + path, errno);
    p += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

void AddStackHookEnv(const std::string& run_dir, const std::string& worker_dir,
                     std::vector<std::string>* env) {
  auto set = [env](const std::string& name, const std::string& value) {
    std::string prefix = name + "=";
    auto at = std::lower_bound(env->begin(), env->end(), prefix);
    if (at != env->end() && at->starts_with(prefix)) {
      *at = prefix + value;
    } else {
      env->insert(at, prefix + value);
    }
  };
  std::string path = StackHookDir(run_dir);
  auto inherited = std::find_if(env->begin(), env->end(), [](const std::string& kv) {
    return kv.starts_with("PYTHONPATH=");
  });
  if (inherited != env->end() && inherited->size() > sizeof("PYTHONPATH=") - 1) {
    path += ":" + inherited->substr(sizeof("PYTHONPATH=") - 1);
  }
  set("PYTHONPATH", path);
  set("MUSTER_STACKS_DIR", worker_dir);
  set("MUSTER_STACKS_SIGNAL", std::to_string(StackSignal()));
}

}  // namespace muster
