#include "launch/worker_group.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "base/duration.h"
#include "base/errno_status.h"
#include "base/log_format.h"
#include "base/status_macros.h"
#include "launch/reaper.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

absl::Status MakeDirs(const std::string& path) {
  // The leaf first: a rank's directory under an existing attempt directory is one mkdir,
  // not one per component of the path (B7: this runs once per worker spawned).
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return absl::OkStatus();
  if (errno != ENOENT) return ErrnoStatus("mkdir " + path, errno);
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    std::string partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus("mkdir " + partial, errno);
    }
  }
  return absl::OkStatus();
}

// How long a transient spawn failure (fork's EAGAIN/ENOMEM) waits before it is reported:
// the restart it leads to would otherwise fail again at once, and a whole restart budget
// would be spent in milliseconds. 1 s for the first in a row, doubling, at most 16 s.
absl::Duration TransientSpawnBackoff(int failures_in_a_row) {
  return std::min(absl::Seconds(1) * (1 << std::min(failures_in_a_row - 1, 4)), absl::Seconds(16));
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerGroup>> WorkerGroup::Create(EventLoop* loop,
                                                                 absl::Duration shutdown_timeout,
                                                                 ContainmentChoice choice) {
  return Create(loop, shutdown_timeout, std::move(choice), std::make_unique<ExecSource>());
}

absl::StatusOr<std::unique_ptr<WorkerGroup>> WorkerGroup::Create(
    EventLoop* loop, absl::Duration shutdown_timeout, ContainmentChoice choice,
    std::unique_ptr<WorkerSource> source) {
  spdlog::debug("containment: {}", choice.description);
  ASSIGN_OR_RETURN(std::unique_ptr<Watchdog> watchdog,
                   Watchdog::Start(choice.cgroup ? choice.cgroup->path() : ""));
  ASSIGN_OR_RETURN(std::unique_ptr<ConsoleWriter> console, ConsoleWriter::Start());
  std::unique_ptr<WorkerGroup> group(new WorkerGroup(loop, std::move(watchdog), std::move(console),
                                                     shutdown_timeout, std::move(choice),
                                                     std::move(source)));
  WorkerGroup* g = group.get();
  RETURN_IF_ERROR(loop->Add(g->console_->space_fd(), EPOLLIN, [g](uint32_t) {
    uint64_t n;
    // EAGAIN: another wake-up already consumed the counter; nothing to do.
    [[maybe_unused]] ssize_t r = read(g->console_->space_fd(), &n, sizeof(n));
    for (Worker& w : g->workers_) {
      if (w.output) w.output->ResumeIfRoom();
    }
  }));
  if (g->cgroup_) {
    // "populated 0" of the attempt's cgroup: the stop may be complete.
    RETURN_IF_ERROR(loop->Add(g->cgroup_->wait_fd(), EPOLLIN, [g](uint32_t) {
      g->cgroup_->ConsumeWaitEvents();
      g->processes_->OnReaped();
    }));
  }
  return group;
}

WorkerGroup::WorkerGroup(EventLoop* loop, std::unique_ptr<Watchdog> watchdog,
                         std::shared_ptr<ConsoleWriter> console, absl::Duration shutdown_timeout,
                         ContainmentChoice containment, std::unique_ptr<WorkerSource> source)
    : loop_(loop),
      cgroup_(std::move(containment.cgroup)),
      containment_(std::move(containment.description)),
      watchdog_(std::move(watchdog)),
      console_(std::move(console)) {
  processes_ = std::make_unique<ProcessGroup>(
      loop_, watchdog_.get(), shutdown_timeout,
      [this](const std::vector<pid_t>& abandoned) { OnProcessesStopped(abandoned); },
      cgroup_.get());
  source_ = std::move(source);
  processes_->SetOwnHelpers([s = source_.get()](pid_t pid) { return s->IsOwnHelper(pid); });
}

WorkerGroup::~WorkerGroup() {
  if (console_) loop_->Remove(console_->space_fd());
  if (cgroup_) loop_->Remove(cgroup_->wait_fd());
}

absl::Status WorkerGroup::Start(int attempt, std::vector<WorkerSpec> specs) {
  (void)attempt;  // the specs' directories carry it
  RETURN_IF_ERROR(processes_->Begin());
  workers_.clear();
  stuck_.clear();
  workers_.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    WorkerSpec& spec = specs[i];
    Worker& w = workers_[i];
    w.placement = spec.placement;
    RETURN_IF_ERROR(MakeDirs(spec.dir));
    w.error_file = spec.error_file;
    w.dir = spec.dir;
    unlink(w.error_file.c_str());  // ENOENT expected: a stale file would fake a root cause
    ASSIGN_OR_RETURN(w.output,
                     WorkerOutput::Create(loop_, console_.get(), std::move(spec.output_prefix),
                                          spec.out, spec.err));
    ASSIGN_OR_RETURN(bool started, StartWorker(w, *source_, spec.spawn));
    if (!started) {
      workers_.resize(i + 1);  // the rest were never started
      return absl::OkStatus();
    }
  }
  transient_spawn_failures_ = 0;  // every worker of the attempt was started
  return absl::OkStatus();
}

absl::Status WorkerGroup::StartCommand(std::vector<std::string> argv,
                                       std::vector<std::string> env) {
  RETURN_IF_ERROR(processes_->Begin());
  workers_.clear();
  stuck_.clear();
  workers_.resize(1);
  Worker& w = workers_[0];
  ASSIGN_OR_RETURN(w.output, WorkerOutput::Create(loop_, console_.get(),
                                                  "[debug]:", StreamOptions{}, StreamOptions{}));
  SpawnSpec spec{.argv = std::move(argv), .env = std::move(env)};
  ExecSource exec;  // whatever source the workers have: a command is exec'd
  return StartWorker(w, exec, spec).status();
}

absl::StatusOr<bool> WorkerGroup::StartWorker(Worker& w, WorkerSource& source,
                                              const SpawnSpec& spec) {
  ASSIGN_OR_RETURN(OutputPipes pipes, OutputPipes::Create());
  absl::StatusOr<WorkerSource::Started> started = source.Start(
      spec, processes_->containment(), pipes.stdout_write.get(), pipes.stderr_write.get());
  // The worker holds its own: EOF once it (and its children) closed them.
  pipes.stdout_write.reset();
  pipes.stderr_write.reset();
  if (!started.ok()) {
    const absl::Status& why = started.status();
    // Not executable / not found: reported like an exit with 126/127, fatal whatever the
    // policy. No process to be had now (fork's EAGAIN/ENOMEM): like an exit with 138, the
    // transient code, which the policy decides on as on any exit.
    int code = SpawnFailureExitCode(why);
    bool transient = IsTransientSpawnFailure(why);
    w.status = ExitStatus{code, 0};
    std::string what = transient ? absl::StrCat("cannot start the worker: ", why.message(),
                                                ", reported as exit ", code)
                                 : std::string(why.message());
    absl::Duration delay = absl::ZeroDuration();
    if (transient) {
      delay = TransientSpawnBackoff(++transient_spawn_failures_);
      spdlog::warn("rank {}: {}; reported in {} ({} transient spawn failure{} in a row)",
                   w.placement.rank, what, HumanDuration(delay), transient_spawn_failures_,
                   transient_spawn_failures_ == 1 ? "" : "s");
    }
    ReportExit(w, WorkerExit{.code = code, .exec_failed = !transient, .what = std::move(what)},
               delay);
    return false;
  }
  w.start = started->how;
  w.fallback = std::move(started->fallback);
  RETURN_IF_ERROR(Adopt(w, AdoptedWorker{.pid = started->pid,
                                         .pidfd = std::move(started->pidfd),
                                         .stdout_fd = std::move(pipes.stdout_read),
                                         .stderr_fd = std::move(pipes.stderr_read)}));
  return true;
}

absl::Status WorkerGroup::Adopt(Worker& w, AdoptedWorker worker) {
  processes_->Adopt(worker.pid, std::move(worker.pidfd));
  w.pid = worker.pid;
  return w.output->Attach(std::move(worker.stdout_fd), std::move(worker.stderr_fd));
}

void WorkerGroup::OnChildSignal() {
  ReapExitedChildren([this](pid_t pid, int wstatus) { OnChildExited(pid, wstatus); });
  processes_->OnReaped();
}

void WorkerGroup::OnChildExited(pid_t pid, int wstatus) {
  if (processes_->OnChildExited(pid)) {
    auto it = std::find_if(workers_.begin(), workers_.end(),
                           [pid](const Worker& w) { return w.pid == pid; });
    it->status = ExitStatus::FromWaitStatus(wstatus);
    ReportExit(*it, WorkerExit{.code = it->status->code(), .what = it->status->Describe()});
  } else if (pid == watchdog_->pid()) {
    OnWatchdogExited(wstatus);
  } else {
    spdlog::debug("reaped orphan pid {} ({})", pid, ExitStatus::FromWaitStatus(wstatus).Describe());
  }
}

void WorkerGroup::OnWatchdogExited(int wstatus) {
  if (watchdog_->disarmed()) return;
  pid_t old = watchdog_->pid();
  // Until the new one runs, the agent is alive and still owns cleanup; the gap is this one
  // turn of the loop.
  if (absl::Status s = watchdog_->Restart(); !s.ok()) {
    spdlog::error("watchdog (pid {}) died ({}) and cannot be restarted: {}", old,
                  ExitStatus::FromWaitStatus(wstatus).Describe(), s.message());
    return;
  }
  processes_->TrackAgain();
  spdlog::warn("watchdog (pid {}) died ({}); restarted as pid {}", old,
               ExitStatus::FromWaitStatus(wstatus).Describe(), watchdog_->pid());
}

void WorkerGroup::ReportExit(Worker& w, WorkerExit exit, absl::Duration delay) {
  exit.placement = w.placement;
  exit.pid = w.pid;
  exit.dir = w.dir;
  exit.signal = w.status ? w.status->signal : 0;
  exit.while_stopping = processes_->stopping();
  if (!exit.while_stopping && exit.code != 0) {
    absl::StatusOr<std::optional<WorkerError>> error = ReadErrorFile(w.error_file);
    if (!error.ok()) {
      spdlog::warn("rank {}: {}", w.placement.rank, error.status().message());
    } else {
      exit.error = *error;
    }
    // The worker has exited: what it wrote is in the pipe now, whether or not the loop
    // has read it yet.
    if (w.output) exit.stderr_tail = w.output->StderrTail();
  }
  // Posted, so the agent never reacts from inside Start() or a reap loop.
  auto report = [cb = callbacks_.on_exit, exit = std::move(exit)] { cb(exit); };
  if (delay > absl::ZeroDuration()) {
    loop_->AddTimer(EventLoop::Now() + delay, std::move(report));
  } else {
    loop_->Post(std::move(report));
  }
}

void WorkerGroup::OnProcessesStopped(const std::vector<pid_t>& abandoned) {
  stuck_.clear();
  for (pid_t pid : abandoned) {
    StuckProcess p = DescribeStuckProcess(pid);
    auto w = std::find_if(workers_.begin(), workers_.end(),
                          [pid](const Worker& w) { return w.pid == pid; });
    if (w != workers_.end()) {
      p.rank = w->placement.rank;
      p.local_rank = w->placement.local_rank;
    }
    stuck_.push_back(std::move(p));
  }
  for (Worker& w : workers_) {
    if (w.pid != 0 && !w.status &&
        std::find(abandoned.begin(), abandoned.end(), w.pid) != abandoned.end()) {
      w.status = ExitStatus{0, SIGKILL};
    }
    if (w.output) w.output->Finish();
  }
  callbacks_.on_stopped();
}

std::vector<WorkerView> WorkerGroup::Workers() const {
  std::vector<WorkerView> out;
  out.reserve(workers_.size());
  for (const Worker& w : workers_)
    out.push_back(WorkerView{w.placement, w.pid, w.status, w.dir, w.start, w.fallback});
  return out;
}

bool WorkerGroup::AllSucceeded() const {
  return !workers_.empty() && std::all_of(workers_.begin(), workers_.end(), [](const Worker& w) {
    return w.status && w.status->success();
  });
}

void WorkerGroup::BeginShutdown() { watchdog_->Disarm(); }

void WorkerGroup::FinishShutdown() {
  loop_->Remove(console_->space_fd());
  // The workers' last output: the agent's summary must follow it. Bounded, and at once
  // on a stalled console, which must not hold up the agent's exit (the agent's log
  // lines after this share the writer, so it stays open).
  console_->Drain(absl::Seconds(1));
  console_.reset();
  // Reaped when it is gone already. Not waited for: the disarmed watchdog exits as soon as
  // it runs, and its exit (a forked copy of this process's mappings) costs ~0.5 ms that the
  // agent's exit need not include (B8); whoever inherits it (init, a subreaper) reaps it.
  watchdog_->ReapIfGone();
}

}  // namespace muster
