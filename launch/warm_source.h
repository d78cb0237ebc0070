// WarmSource: ranks forked from a warm Python template instead of exec'd (`muster run
// --warm-start`, docs/design.md §4.5a).
//
// At creation it starts one template per agent: `python -u -c <launch/warm_template.py>`,
// which imports the preloaded modules (torch by default) once and then waits on a
// SOCK_SEQPACKET socket. For each worker the source sends the spec (argv, environment,
// directory, CPUs) and the worker's stdout, stderr and go socket; the template checks that a
// fork is safe (one thread, no CUDA context, the import-time environment unchanged), forks
// the rank through a middle process so that it becomes the agent's child (the agent is a
// child subreaper), and replies with its pid. The source then contains the rank as the
// exec path would (cgroup.procs, or the watchdog) and only then sends the go byte: no code
// of the job runs uncontained. When a spec cannot be made warm (not `python -u ...`, a NUMA
// memory policy, a cgroup namespace) or the template says a fork is unsafe or has died, that
// worker is exec'd through ExecSource, and the first such fallback is logged with its reason.
//
// The template is the agent's child in a session of its own with PDEATHSIG SIGKILL; it exits
// when the source is destroyed (EOF on its socket). Start() blocks the calling thread until
// the template answers (at most the import on the first call, `Options::first_reply`).
// Not thread-safe: the loop thread only (the thread that reaps).
#ifndef MUSTER_LAUNCH_WARM_SOURCE_H_
#define MUSTER_LAUNCH_WARM_SOURCE_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "launch/worker_source.h"

namespace muster {

// launch/warm_template.py, compiled in.
extern const char kWarmTemplateSource[];

class WarmSource : public WorkerSource {
 public:
  struct Options {
    std::string python_exec;           // the workers' interpreter (argv[0] of their specs)
    std::vector<std::string> preload;  // modules the template imports
    std::vector<std::string> env;      // the template's environment
    // How long a rank request may wait for the template's answer: the first waits for the
    // imports, the others for one fork.
    absl::Duration first_reply = absl::Minutes(10);
    absl::Duration reply = absl::Seconds(30);
  };

  // Spawns the template (it imports in the background). Errors: Spawn's.
  static absl::StatusOr<std::unique_ptr<WarmSource>> Create(Options options);
  ~WarmSource() override;

  absl::StatusOr<Started> Start(const SpawnSpec& spec, const WorkerContainment& containment,
                                int stdout_fd, int stderr_fd) override;
  bool IsOwnHelper(pid_t pid) const override { return pid == template_pid_; }

  pid_t template_pid() const { return template_pid_; }

 private:
  WarmSource(Options options, pid_t template_pid, UniqueFd socket);

  // Why `spec` (contained) cannot be forked warm, or empty.
  std::string WhyNotWarm(const SpawnSpec& spec) const;
  // A rank forked and waiting for `go`'s byte.
  struct Forked {
    Started started;
    UniqueFd go;
  };
  // The warm path. FailedPrecondition: fall back to exec (the message says why); other
  // errors: the rank could not be started.
  absl::StatusOr<Forked> Fork(const SpawnSpec& contained, int stdout_fd, int stderr_fd);
  // Sends the request; the template's answer ("pid N" / "fallback WHY").
  absl::StatusOr<std::string> Ask(const std::string& request, const int fds[3]);
  // Puts rank `pid` where `containment` says, as the exec child would itself.
  absl::Status Contain(pid_t pid, int pidfd, const WorkerContainment& containment);
  void NoteFallback(const std::string& why);

  Options options_;
  pid_t template_pid_;
  UniqueFd socket_;  // -1 once the template is known to be gone
  bool answered_once_ = false;
  bool fallback_logged_ = false;
  ExecSource exec_;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_WARM_SOURCE_H_
