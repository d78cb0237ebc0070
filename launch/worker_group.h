// WorkerGroup: the real WorkerLauncher. Starts an attempt's workers from their specs
// (directories, output pipes into per-rank files and the console, spawn), reaps them
// and every orphan the agent adopted as a subreaper, reads torch's error file of a worker
// that failed, and stops the attempt through a ProcessGroup (signals, SIGKILL after the
// grace period, leftovers).
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

namespace muster {

class WorkerGroup : public WorkerLauncher {
 public:
  // `shutdown_timeout`: SIGTERM (or the agent's signal) to SIGKILL.
  // `containment`: see launch/containment.h.
  static absl::StatusOr<std::unique_ptr<WorkerGroup>> Create(
      EventLoop* loop, absl::Duration shutdown_timeout,
      Containment containment = Containment::kAuto);
  ~WorkerGroup() override;

  void SetCallbacks(Callbacks callbacks) override { callbacks_ = std::move(callbacks); }
  absl::Status Start(int attempt, std::vector<WorkerSpec> specs) override;
  absl::Status StartCommand(std::vector<std::string> argv, std::vector<std::string> env) override;
  void Stop(int sig) override { processes_->Stop(sig); }
  void Escalate() override { processes_->Escalate(); }
  void OnChildSignal() override;

  std::vector<WorkerView> Workers() const override;
  std::string containment() const override { return containment_; }
  bool running() const override { return processes_->running(); }
  bool stopping() const override { return processes_->stopping(); }
  bool AllSucceeded() const override;

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
    std::unique_ptr<WorkerOutput> output;
  };

  WorkerGroup(EventLoop* loop, std::unique_ptr<Watchdog> watchdog,
              std::shared_ptr<ConsoleWriter> console, absl::Duration shutdown_timeout,
              ContainmentChoice containment);
  void OnWatchdogExited(int wstatus);
  // Spawns `spec` with its stdio wired to w.output; on failure reports the exit (126/127)
  // and returns false.
  bool SpawnWorker(Worker& w, SpawnSpec spec);
  void OnChildExited(pid_t pid, int wstatus);
  void OnProcessesStopped(const std::vector<pid_t>& abandoned);
  // Completes `exit` (the error file and the stderr tail of a failure) and posts it.
  void ReportExit(Worker& w, WorkerExit exit);

  EventLoop* loop_;
  std::unique_ptr<JobCgroup> cgroup_;  // mode cgroup; outlives processes_
  std::string containment_;
  std::unique_ptr<Watchdog> watchdog_;
  std::shared_ptr<ConsoleWriter> console_;
  std::unique_ptr<ProcessGroup> processes_;
  Callbacks callbacks_;
  std::vector<Worker> workers_;
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_WORKER_GROUP_H_
