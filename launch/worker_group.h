// WorkerGroup: the real WorkerLauncher. Starts an attempt's workers from their specs
// (directories, output pipes into per-rank files and the console) through a WorkerSource
// (where a worker comes from: ExecSource's clone + exec unless another is given,
// launch/worker_source.h), and supervises what the source hands over the same way whatever
// it is: reaps the workers and every orphan the agent adopted as a subreaper, reads torch's
// error file of a worker that failed, and stops the attempt through a ProcessGroup (signals
// through pidfds, containment, SIGKILL after the grace period, leftovers).
//
// Owns the job cgroup (mode cgroup) and the watchdog (forked; restarted when it dies), and
// shares the console writer (a thread; the agent's log sink holds it too, see console()):
// Create() must run after the agent blocked its signals. Borrows the loop.
// Not thread-safe: the loop thread only.
#ifndef MUSTER_LAUNCH_WORKER_GROUP_H_
#define MUSTER_LAUNCH_WORKER_GROUP_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/event_loop.h"
#include "launch/cgroup.h"
#include "launch/console_writer.h"
#include "launch/containment.h"
#include "launch/process_group.h"
#include "launch/watchdog.h"
#include "launch/worker_launcher.h"
#include "launch/worker_output.h"
#include "launch/worker_source.h"

namespace muster {

class WorkerGroup : public WorkerLauncher {
 public:
  // `shutdown_timeout`: SIGTERM (or the agent's signal) to SIGKILL.
  // `containment`: the mode in force, ChooseContainment()'s (launch/containment.h).
  // `source`: where the attempts' workers come from (debug mode's command is always exec'd).
  static absl::StatusOr<std::unique_ptr<WorkerGroup>> Create(EventLoop* loop,
                                                             absl::Duration shutdown_timeout,
                                                             ContainmentChoice containment,
                                                             std::unique_ptr<WorkerSource> source);
  // With ExecSource.
  static absl::StatusOr<std::unique_ptr<WorkerGroup>> Create(EventLoop* loop,
                                                             absl::Duration shutdown_timeout,
                                                             ContainmentChoice containment);
  ~WorkerGroup() override;

  void SetCallbacks(Callbacks callbacks) override { callbacks_ = std::move(callbacks); }
  absl::Status Start(int attempt, std::vector<WorkerSpec> specs) override;
  absl::Status StartCommand(std::vector<std::string> argv, std::vector<std::string> env) override;
  void Stop(int sig) override { processes_->Stop(sig); }
  void StopWithin(int sig, absl::Duration grace) override { processes_->Stop(sig, grace); }
  void Escalate() override { processes_->Escalate(); }
  void OnChildSignal() override;

  std::vector<WorkerView> Workers() const override;
  std::string containment() const override { return containment_; }
  bool running() const override { return processes_->running(); }
  bool stopping() const override { return processes_->stopping(); }
  bool AllSucceeded() const override;
  std::vector<StuckProcess> Stuck() const override { return stuck_; }

  void BeginShutdown() override;
  void FinishShutdown() override;

  // The writer of the workers' console lines, for the agent's own (LogThroughConsole).
  std::shared_ptr<ConsoleWriter> console() const { return console_; }

 private:
  struct Worker {
    WorkerPlacement placement;
    pid_t pid = 0;
    std::optional<ExitStatus> status;
    std::string error_file;
    std::string dir;
    WorkerStart start = WorkerStart::kExec;
    std::string fallback;  // WorkerSource::Started::fallback
    std::unique_ptr<WorkerOutput> output;
  };

  WorkerGroup(EventLoop* loop, std::unique_ptr<Watchdog> watchdog,
              std::shared_ptr<ConsoleWriter> console, absl::Duration shutdown_timeout,
              ContainmentChoice containment, std::unique_ptr<WorkerSource> source);
  void OnWatchdogExited(int wstatus);
  // Starts `spec` through `source` with its stdout and stderr on fresh pipes, and adopts it.
  // False when it could not be started (the exit, 126/127/138, is reported); errors: local
  // problems (pipes, the loop).
  absl::StatusOr<bool> StartWorker(Worker& w, WorkerSource& source, const SpawnSpec& spec);
  // Supervision of a started worker, whatever its source: a member of the attempt's
  // ProcessGroup (exit, signals, containment), its output pumped into w.output.
  absl::Status Adopt(Worker& w, AdoptedWorker worker);
  void OnChildExited(pid_t pid, int wstatus);
  void OnProcessesStopped(const std::vector<pid_t>& abandoned);
  // Completes `exit` (the error file and the stderr tail of a failure) and posts it.
  // `delay`: reported that much later (a transient spawn failure's backoff).
  void ReportExit(Worker& w, WorkerExit exit, absl::Duration delay = absl::ZeroDuration());

  EventLoop* loop_;
  std::unique_ptr<JobCgroup> cgroup_;  // mode cgroup; outlives processes_
  std::string containment_;
  std::unique_ptr<Watchdog> watchdog_;
  std::shared_ptr<ConsoleWriter> console_;
  std::unique_ptr<ProcessGroup> processes_;
  std::unique_ptr<WorkerSource> source_;
  Callbacks callbacks_;
  std::vector<Worker> workers_;
  std::vector<StuckProcess> stuck_;  // the last stop's (Stuck())
  // Attempts in a row whose start failed for want of processes or memory (the backoff).
  int transient_spawn_failures_ = 0;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_WORKER_GROUP_H_
