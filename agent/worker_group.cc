#include "agent/worker_group.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/duration.h"
#include "base/errno_status.h"
#include "base/log_format.h"
#include "base/status_macros.h"
#include "launch/cpu_topology.h"
#include "launch/process_tree.h"
#include "launch/spawner.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// Extra time after SIGKILL for the kernel to tear processes down (a worker freeing a lot
// of GPU memory can take seconds). Past it the group gives up waiting and says so.
constexpr absl::Duration kKillGrace = absl::Seconds(10);

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

}  // namespace

WorkerGroup::WorkerGroup(const Config& config, std::string hostname, std::string run_dir,
                         EventLoop* loop, ConsoleWriter* console, Watchdog* watchdog,
                         EventLog* events, Callbacks callbacks)
    : config_(config),
      hostname_(std::move(hostname)),
      run_dir_(std::move(run_dir)),
      loop_(loop),
      console_(console),
      watchdog_(watchdog),
      events_(events),
      callbacks_(std::move(callbacks)) {}

WorkerGroup::~WorkerGroup() {
  if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  if (kill_timer_ != 0) loop_->CancelTimer(kill_timer_);
}

absl::Status WorkerGroup::Start(int group_rank, int rank_base, int world_size, int group_world_size,
                                const RoundInfo& round_in) {
  state_ = State::kRunning;
  attempt_ = round_in.restart_count;
  workers_.clear();
  RoundInfo round = round_in;
  std::string attempt_dir = absl::StrCat(run_dir_, "/attempt_", attempt_);
  const int n = config_.nproc_per_node;
  workers_.resize(n);
  std::vector<int> cpus;
  std::map<int, int> numa;
  if (config_.bind_cores_to_rank) {
    cpus = config_.bind_core_list.empty() ? AffinityCpus() : config_.bind_core_list;
    numa = NumaNodeOfCpu();
  }
  absl::Time t0 = EventLoop::Now();
  for (int local = 0; local < n; ++local) {
    Worker& w = workers_[local];
    int rank = rank_base + local;
    w.placement =
        WorkerPlacement{local, rank, group_rank, group_world_size, n, world_size, rank, world_size};
    std::string dir = absl::StrCat(attempt_dir, "/", local);
    RETURN_IF_ERROR(MakeDirs(dir));
    w.error_file = dir + "/error.json";
    unlink(w.error_file.c_str());  // ENOENT expected: a stale file would fake a root cause
    round.error_file = w.error_file;

    int redirect = config_.redirects.For(local), tee = config_.tee.For(local);
    bool filtered = !config_.local_ranks_filter.empty() && !config_.local_ranks_filter.count(local);
    StreamOptions out, err;
    for (int bit : {1, 2}) {
      StreamOptions& s = bit == 1 ? out : err;
      bool file = !config_.log_dir.empty() || ((redirect | tee) & bit);
      if (file) s.file = absl::StrCat(dir, bit == 1 ? "/stdout.log" : "/stderr.log");
      s.to_console = !filtered && (!(redirect & bit) || (tee & bit));
    }
    ASSIGN_OR_RETURN(
        w.output, WorkerOutput::Create(loop_, console_,
                                       ExpandPrefix(config_.log_line_prefix_template, config_.role,
                                                    w.placement, hostname_),
                                       out, err));
    SpawnSpec spec;
    spec.argv = BuildWorkerArgv(config_, local);
    if (config_.bind_cores_to_rank) spec.cpus = CpuShare(cpus, numa, local, n);
    spec.env = BuildWorkerEnv(config_.worker_env_base, config_, w.placement, round);
    if (config_.bind_cores_to_rank && !spec.cpus.empty() &&
        !config_.worker_env_base.count("OMP_NUM_THREADS")) {
      // As DeepSpeed's launcher does when it binds cores: one OpenMP thread per CPU of the
      // rank's share, instead of torchrun's 1 (which would leave a bound share idle).
      std::erase_if(spec.env,
                    [](const std::string& kv) { return kv.starts_with("OMP_NUM_THREADS="); });
      spec.env.push_back(absl::StrCat("OMP_NUM_THREADS=", spec.cpus.size()));
    }
    if (!SpawnWorker(w, std::move(spec))) {
      workers_.resize(local + 1);  // the rest were never started
      break;
    }
    if (events_->enabled()) {
      events_->Write(
          "worker_started",
          {{"attempt", attempt_}, {"local_rank", local}, {"rank", rank}, {"pid", w.pid}});
    }
  }
  spdlog::info("attempt {}: started {} worker{} in {:.2f} ms (ranks {}..{} of {}, master {}:{})",
               attempt_, workers_.size(), workers_.size() == 1 ? "" : "s",
               absl::ToDoubleMilliseconds(EventLoop::Now() - t0), rank_base, rank_base + n - 1,
               world_size, round.master_addr, round.master_port);
  return absl::OkStatus();
}

bool WorkerGroup::SpawnWorker(Worker& w, SpawnSpec spec) {
  spec.fds = {{w.output->child_stdout(), 1}, {w.output->child_stderr(), 2}};
  absl::StatusOr<pid_t> pid = Spawn(spec);
  w.output->CloseChildEnds();
  if (!pid.ok()) {
    // Not executable / not found: reported like an exit with 126/127, fatal by policy.
    int code = ExecFailureExitCode(pid.status());
    w.status = ExitStatus{code, 0};
    WorkerExit exit;
    exit.code = code;
    exit.exec_failed = true;
    exit.what = std::string(pid.status().message());
    ReportExit(w, std::move(exit));
    return false;
  }
  w.pid = *pid;
  watchdog_->Track(w.pid);
  return true;
}

absl::Status WorkerGroup::StartCommand(const std::vector<std::string>& argv) {
  state_ = State::kRunning;
  workers_.clear();
  workers_.resize(1);
  Worker& w = workers_[0];
  w.error_file = absl::StrCat(run_dir_, "/debug-error.json");
  ASSIGN_OR_RETURN(w.output, WorkerOutput::Create(loop_, console_, "[debug]:", StreamOptions{},
                                                  StreamOptions{}));
  SpawnSpec spec;
  spec.argv = argv;
  for (const auto& [k, v] : config_.worker_env_base) spec.env.push_back(absl::StrCat(k, "=", v));
  SpawnWorker(w, std::move(spec));
  return absl::OkStatus();
}

void WorkerGroup::ReportExit(const Worker& w, WorkerExit exit) {
  exit.placement = w.placement;
  exit.pid = w.pid;
  exit.signal = w.status ? w.status->signal : 0;
  exit.while_stopping = state_ == State::kStopping;
  if (!exit.while_stopping && exit.code != 0) {
    absl::StatusOr<std::optional<WorkerError>> error = ReadErrorFile(w.error_file);
    if (!error.ok()) {
      spdlog::warn("rank {}: {}", w.placement.rank, error.status().message());
    } else {
      exit.error = *error;
    }
  }
  if (events_->enabled()) {  // the fields cost allocations per worker even when unused
    events_->Write("worker_exited", {{"attempt", attempt_},
                                     {"local_rank", w.placement.local_rank},
                                     {"rank", w.placement.rank},
                                     {"pid", w.pid},
                                     {"code", exit.code},
                                     {"signal", exit.signal},
                                     {"while", exit.while_stopping ? "stopping" : "running"}});
  }
  // Posted, so the agent never reacts from inside Start() or a reap loop.
  loop_->Post([cb = callbacks_.on_exit, exit = std::move(exit)] { cb(exit); });
}

bool WorkerGroup::OnChildExited(pid_t pid, int wstatus) {
  auto it = std::find_if(workers_.begin(), workers_.end(),
                         [pid](const Worker& w) { return w.pid == pid && !w.status; });
  if (it == workers_.end()) return false;
  it->status = ExitStatus::FromWaitStatus(wstatus);
  WorkerExit exit;
  exit.code = it->status->code();
  exit.what = it->status->Describe();
  ReportExit(*it, std::move(exit));
  return true;
}

std::vector<WorkerGroup::WorkerView> WorkerGroup::Workers() const {
  std::vector<WorkerView> out;
  for (const Worker& w : workers_) out.push_back(WorkerView{w.placement, w.pid, w.status});
  return out;
}

void WorkerGroup::ResumeOutput() {
  for (Worker& w : workers_) {
    if (w.output) w.output->ResumeIfRoom();
  }
}

bool WorkerGroup::AllSucceeded() const {
  return !workers_.empty() && std::all_of(workers_.begin(), workers_.end(), [](const Worker& w) {
    return w.status && w.status->success();
  });
}

void WorkerGroup::Stop(int sig) {
  if (state_ == State::kIdle) {
    loop_->Post(callbacks_.on_stopped);
    return;
  }
  if (state_ == State::kStopping) {
    // A signal to the agent while a failure is being handled: forward it as well.
    if (sig != stop_signal_ && stop_signal_ != SIGKILL) SignalLeftovers(sig);
    return;
  }
  state_ = State::kStopping;
  stop_signal_ = sig;
  stop_started_ = EventLoop::Now();
  SignalLeftovers(sig);
  stop_timer_ = loop_->AddTimer(stop_started_ + config_.shutdown_timeout, [this] {
    stop_timer_ = 0;
    Escalate();
  });
  MaybeFinishStop();
}

void WorkerGroup::Escalate() {
  if (state_ != State::kStopping || stop_signal_ == SIGKILL) return;
  if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  stop_timer_ = 0;
  spdlog::info("sending SIGKILL to what is left of the workers after {}",
               HumanDuration(EventLoop::Now() - stop_started_));
  stop_signal_ = SIGKILL;
  SignalLeftovers(SIGKILL);
  kill_timer_ = loop_->AddTimer(EventLoop::Now() + kKillGrace, [this] {
    kill_timer_ = 0;
    if (state_ != State::kStopping) return;
    spdlog::error(
        "processes of the job survived SIGKILL for {} (uninterruptible sleep?); giving up on "
        "them",
        HumanDuration(kKillGrace));
    for (Worker& w : workers_) {
      if (!w.status) w.status = ExitStatus{0, SIGKILL};
    }
    state_ = State::kIdle;
    loop_->Post(callbacks_.on_stopped);
  });
  MaybeFinishStop();
}

void WorkerGroup::SignalLeftovers(int sig) {
  std::set<pid_t> sessions;
  for (Worker& w : workers_) {
    if (w.pid == 0) continue;
    sessions.insert(w.pid);
    kill(-w.pid, sig);  // ESRCH: the whole group is gone already, which is what we want
  }
  if (sig == SIGKILL) {
    for (pid_t p : FindSessionMembers(sessions)) kill(p, SIGKILL);
  }
  // Orphans adopted by the agent (daemons a worker double-forked, children of dead
  // workers): they belong to the job too.
  for (pid_t child : ListChildren()) {
    if (child == watchdog_->pid()) continue;
    if (std::any_of(workers_.begin(), workers_.end(),
                    [child](const Worker& w) { return w.pid == child; })) {
      continue;  // signalled through its group above
    }
    kill(child, sig);
  }
}

void WorkerGroup::OnReaped() {
  if (state_ == State::kStopping) MaybeFinishStop();
}

void WorkerGroup::MaybeFinishStop() {
  if (state_ != State::kStopping) return;
  for (const Worker& w : workers_) {
    if (w.pid != 0 && !w.status) return;
  }
  bool leftovers = false;
  for (const Worker& w : workers_) {
    if (w.pid != 0 && ProcessGroupExists(w.pid)) leftovers = true;
  }
  for (pid_t child : ListChildren()) {
    if (child != watchdog_->pid()) leftovers = true;
  }
  if (leftovers) {
    // New orphans may have been adopted since the last round of signals; they get the
    // current one too. Their exits arrive as SIGCHLD and bring us back here.
    SignalLeftovers(stop_signal_);
    return;
  }
  if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  if (kill_timer_ != 0) loop_->CancelTimer(kill_timer_);
  stop_timer_ = kill_timer_ = 0;
  std::vector<pid_t> sessions;
  for (Worker& w : workers_) {
    if (w.output) w.output->Finish();
    if (w.pid != 0) sessions.push_back(w.pid);
  }
  watchdog_->Untrack(sessions);
  spdlog::debug("workers of attempt {} stopped in {}", attempt_,
                HumanDuration(EventLoop::Now() - stop_started_));
  state_ = State::kIdle;
  loop_->Post(callbacks_.on_stopped);
}

}  // namespace muster
