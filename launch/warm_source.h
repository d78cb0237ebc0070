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
// exec path would (cgroup.procs, or the watchdog; the rank makes its cgroup namespace itself
// after the byte, where the exec path's clone3 makes one) and only then sends the go byte: no code
// of the job runs uncontained. When a spec cannot be made warm (not `python -u ...`, a NUMA
// memory policy) or the template says a fork is unsafe or has died, that
// worker is exec'd through ExecSource, and the first such fallback is logged with its reason.
//
// The template is the agent's child in a session of its own with PDEATHSIG SIGKILL; it exits
// when the source is destroyed (EOF on its socket). One that dies or stops answering after
// it has made ranks is killed and replaced (at most kMaxReplacements times): the workers
// of that attempt are exec'd while the new one imports. Start() never waits for an import: a
// template still importing makes the worker exec'd. The agent waits for the first template's
// imports as an event of its loop instead (importing_fd(), agent/workers/warm_start_gate.h),
// so that signals are handled meanwhile; Start() waits only for one fork's answer (`reply`).
// Not thread-safe: the loop thread only (the thread that reaps).
#ifndef MUSTER_LAUNCH_WARM_SOURCE_H_
#define MUSTER_LAUNCH_WARM_SOURCE_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "launch/worker_source.h"

namespace muster {

// launch/warm_template.py, compiled in.
extern const char kWarmTemplateSource[];
// The file name its frames carry, below a warm rank's script in a stack.
inline constexpr char kWarmTemplateFileName[] = "<muster warm template>";

class WarmSource : public WorkerSource {
 public:
  struct Options {
    std::string python_exec;           // the workers' interpreter (argv[0] of their specs)
    std::vector<std::string> preload;  // modules the template imports
    std::vector<std::string> env;      // the template's environment
    // How long a template may import (after that it is retired and the workers exec'd), and
    // how long a rank request may wait for the template's answer (one fork).
    absl::Duration first_reply = absl::Minutes(10);
    absl::Duration reply = absl::Seconds(30);
  };

  // Spawns the template (it imports in the background). Errors: Spawn's.
  static absl::StatusOr<std::unique_ptr<WarmSource>> Create(Options options);
  ~WarmSource() override;

  absl::StatusOr<Started> Start(const SpawnSpec& spec, const WorkerContainment& containment,
                                int stdout_fd, int stderr_fd) override;
  bool IsOwnHelper(pid_t pid) const override { return pid > 0 && pid == template_.pid; }

  // While the current template imports: its socket, readable when it says "ready" or exits;
  // -1 once it is ready or gone.
  int importing_fd() const;
  // When the current template's imports are given up (spawn + `first_reply`).
  absl::Time import_deadline() const { return template_.deadline; }
  // Takes the template's "ready" if it has said it, without waiting; retires a template that
  // exited or overran import_deadline(). Afterwards importing_fd() may be -1.
  void CheckReady();

 private:
  // A template that died after it had made ranks is replaced at most this often.
  static constexpr int kMaxReplacements = 3;

  struct Template {
    pid_t pid = 0;
    UniqueFd pidfd;
    UniqueFd socket;      // ours; -1: none
    bool ready = false;   // it said "ready": its imports are done
    absl::Time deadline;  // for "ready"
  };
  static absl::StatusOr<Template> SpawnTemplate(const Options& options);
  WarmSource(Options options, Template first);
  // The template did not answer as it should: SIGKILL (through its pidfd), and a new one
  // where it had worked before.
  void Retire(std::string_view why);

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
  // Whether the current template is ready, without waiting: empty, or why the worker must be
  // exec'd.
  std::string Ready();
  // Sends the request; the template's answer ("pid N" / "fallback WHY").
  absl::StatusOr<std::string> Ask(const std::string& request, const int fds[3]);
  // Puts rank `pid` where `containment` says, as the exec child would itself.
  absl::Status Contain(pid_t pid, int pidfd, const WorkerContainment& containment);
  void NoteFallback(const std::string& why);

  Options options_;
  Template template_;
  bool answered_once_ = false;  // by the current template
  int replacements_ = 0;
  bool fallback_logged_ = false;
  std::string retired_why_;  // why the last template was retired
  ExecSource exec_;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_WARM_SOURCE_H_
