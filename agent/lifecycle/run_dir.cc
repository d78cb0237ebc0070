#include "agent/lifecycle/run_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "agent/diagnostics/stack_hook.h"
#include "agent/lifecycle/remove_tree.h"
#include "agent/lifecycle/stale_run_dirs.h"
#include "base/errno_status.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// Without --log-dir the directory holds only torch's per-rank error.json (plus stream files
// when -r/-t ask for them). Creating and removing a directory per rank on every attempt
// costs up to ms each on a disk file system, so when nothing large will be written there
// it goes to tmpfs (/dev/shm) unless TMPDIR says otherwise.
absl::StatusOr<std::string> MakeTemporaryRoot(bool streams) {
  const char* tmp = getenv("TMPDIR");
  std::string root = tmp && *tmp                                        ? tmp
                     : !streams && access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm"
                                                                        : "/tmp";
  std::string tmpl = absl::StrCat(root, "/muster_XXXXXX");
  if (mkdtemp(tmpl.data()) != nullptr) return tmpl;
  absl::Status st = ErrnoStatus("mkdtemp " + tmpl, errno);
  if (!(tmp && *tmp)) return st;
  return absl::Status(st.code(),
                      absl::StrCat("TMPDIR=", tmp, ": cannot make the run directory there (",
                                   st.message(), "); point TMPDIR at a writable directory"));
}

}  // namespace

absl::StatusOr<RunDir> MakeRunDir(const RunPlan& plan) {
  const Config& config = plan.config;
  for (const std::string& stale : RemoveStaleRunDirs(TemporaryParents())) {
    spdlog::info("removed {}: the run directory of an agent killed before it could clean up",
                 stale);
  }
  RunDir dir;
  if (config.log_dir.empty()) {
    absl::StatusOr<std::string> root = MakeTemporaryRoot(plan.output.stream_files);
    if (!root.ok()) return root.status();
    dir.root = *std::move(root);
    dir.remove_root = true;
    absl::StatusOr<UniqueFd> lock = LockRunRoot(dir.root);
    if (!lock.ok()) {
      RemoveTree(dir.root);
      return lock.status();
    }
    dir.lock = *std::move(lock);
  } else {
    dir.root = config.log_dir;
  }
  std::string run = absl::StrCat(dir.root, "/", plan.run_id, "_XXXXXX");
  if (mkdtemp(run.data()) == nullptr) {
    absl::Status st = ErrnoStatus("mkdtemp " + run, errno);
    if (dir.remove_root) rmdir(dir.root.c_str());  // empty: made just above
    if (config.log_dir.empty()) return st;
    return absl::Status(st.code(), absl::StrCat("--log-dir: ", st.message()));
  }
  dir.path = std::move(run);
  if (!config.no_stack_hook) {
    if (absl::Status hook = WriteStackHook(dir.path); !hook.ok()) return hook;
  }
  dir.stream_files = plan.output.stream_files;
  return dir;
}

bool CleanUpRunDir(const RunDir& dir, bool job_failed) {
  if (!dir.remove_root) return false;  // --log-dir: the user's directory, kept
  if (job_failed && dir.stream_files) {
    // The failed job's logs stay: without the lock file no later agent takes them for stale.
    unlink(absl::StrCat(dir.root, "/", kRunDirLockName).c_str());
    return true;
  }
  if (!RemoveTree(dir.root)) spdlog::debug("could not remove all of {}", dir.root);
  return false;
}

absl::Status CheckDirectoryOf(const char* flag, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  // The file is replaced through PATH.tmp and rename(2), which cannot put a file over a
  // directory: refused here rather than warned about at every transition.
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path,
                                                   ": is a directory; name a file in it, e.g. ",
                                                   flag, " ", path, "/status.json"));
  }
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (access(dir.c_str(), W_OK | X_OK) == 0) return absl::OkStatus();
  absl::Status error = ErrnoStatus("directory " + dir, errno);
  return absl::Status(error.code(), absl::StrCat(flag, " ", path, ": ", error.message()));
}

}  // namespace muster
