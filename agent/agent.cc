#include "agent/agent.h"

#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/duration.h"
#include "base/errno_status.h"
#include "base/log_format.h"
#include "base/status_macros.h"
#include "launch/process_tree.h"
#include "launch/signals.h"
#include "launch/spawner.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// Extra time after SIGKILL for the kernel to tear processes down (a worker
// freeing a lot of GPU memory can take seconds). Past it the agent gives up
// waiting and says so.
constexpr absl::Duration kKillGrace = absl::Seconds(10);

std::string RandomHex(int bytes) {
  unsigned char buf[32];
  if (getrandom(buf, bytes, 0) != bytes) {
    // getrandom on Linux >= 3.17 does not fail for <= 256 bytes; fall back to
    // the clock.
    uint64_t t = absl::ToUnixNanos(absl::Now()) ^ getpid();
    std::memcpy(buf, &t, std::min<int>(bytes, sizeof(t)));
  }
  std::string out;
  for (int i = 0; i < bytes; ++i) absl::StrAppendFormat(&out, "%02x", buf[i]);
  return out;
}

// A free TCP port on 127.0.0.1 (bind to 0, read it back, close): what
// torchrun's
// --standalone does for a static store. It can race; the agent-hosted store
// replaces it.
absl::StatusOr<int> PickFreePort() {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoStatus("bind", errno);
  }
  socklen_t len = sizeof(addr);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoStatus("getsockname", errno);
  }
  return ntohs(addr.sin_port);
}

// Where the agent's store listens: only where workers must reach it. A numeric
// --master-addr is bound as is (127.0.0.1 by default: loopback only); a hostname could
// resolve to any local address, so it gets the dual-stack wildcard.
std::string StoreBindAddress(const std::string& master_addr) {
  if (master_addr == "localhost") return "127.0.0.1";
  in6_addr v6;
  in_addr v4;
  if (inet_pton(AF_INET, master_addr.c_str(), &v4) == 1 ||
      inet_pton(AF_INET6, master_addr.c_str(), &v6) == 1) {
    return master_addr;
  }
  return "::";
}

absl::Status MakeDirs(const std::string& path) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus("mkdir " + partial, errno);
    }
  }
  return absl::OkStatus();
}

void RemoveTree(const std::string& path) {
  nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return remove(p) == 0 ? 0 : 0; },
      16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace

Agent::Agent(Config config, std::map<std::string, std::string> env)
    : config_(std::move(config)), env_(std::move(env)) {}

Agent::~Agent() = default;

absl::Status Agent::Setup() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return ErrnoStatus("gethostname", errno);
  hostname_ = host;
  // Order matters: signals are blocked before the watchdog forks and before the
  // console thread starts, so neither ever receives the job's signals
  // asynchronously.
  ASSIGN_OR_RETURN(events_, EventLog::Open(config_.event_log));
  ASSIGN_OR_RETURN(signal_fd_, BlockAndOpenSignalFd(config_.signals_to_handle));
  RETURN_IF_ERROR(BecomeSubreaper());
  ASSIGN_OR_RETURN(watchdog_, Watchdog::Start());
  ASSIGN_OR_RETURN(console_, ConsoleWriter::Start());
  ASSIGN_OR_RETURN(loop_, EventLoop::Create());
  RETURN_IF_ERROR(loop_->Add(signal_fd_.get(), EPOLLIN, [this](uint32_t) { OnSignalFd(); }));
  RETURN_IF_ERROR(loop_->Add(console_->space_fd(), EPOLLIN, [this](uint32_t) {
    uint64_t n;
    // EAGAIN: another wake-up already consumed the counter; nothing to do.
    [[maybe_unused]] ssize_t r = read(console_->space_fd(), &n, sizeof(n));
    for (Worker& w : workers_) {
      if (w.output) w.output->ResumeIfRoom();
    }
  }));
  run_id_ = config_.run_id;
  if (config_.standalone && run_id_ == "none") {
    std::string h = RandomHex(16);      // a uuid4, like torchrun --standalone
    h[12] = '4';                        // version 4
    h[16] = "89ab"[(h[16] - '0') & 3];  // RFC 4122 variant
    run_id_ = absl::StrCat(h.substr(0, 8), "-", h.substr(8, 4), "-", h.substr(12, 4), "-",
                           h.substr(16, 4), "-", h.substr(20, 12));
  }
  return PrepareRunDir();
}

absl::Status Agent::PrepareRunDir() {
  if (config_.log_dir.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/muster_XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) return ErrnoStatus("mkdtemp " + tmpl, errno);
    log_root_ = tmpl;
    remove_log_root_ = true;
  } else {
    log_root_ = config_.log_dir;
  }
  std::string run = absl::StrCat(log_root_, "/", run_id_, "_XXXXXX");
  if (mkdtemp(run.data()) == nullptr) return ErrnoStatus("mkdtemp " + run, errno);
  run_dir_ = run;
  return absl::OkStatus();
}

absl::Status Agent::StartAttempt() {
  phase_ = Phase::kRunning;
  root_cause_.reset();
  workers_.clear();
  RoundInfo round;
  round.restart_count = restart_count_;
  round.master_addr = config_.master_addr;
  round.master_port = config_.master_port;
  if (config_.store == "agent") {
    // A fresh store on a fresh port for every attempt: keys of a failed attempt can never
    // be read by the next one (pytorch#135712), and nothing races for a fixed port.
    store_.reset();
    c10d::StoreServer::Options options;
    options.bind_address = StoreBindAddress(config_.master_addr);
    ASSIGN_OR_RETURN(store_, c10d::StoreServer::Start(options));
    round.master_port = store_->port();
  } else if (config_.standalone && !config_.master_port_given) {
    ASSIGN_OR_RETURN(round.master_port, PickFreePort());
  }
  round.run_id = run_id_;
  round.use_agent_store = store_ != nullptr;

  std::string attempt_dir = absl::StrCat(run_dir_, "/attempt_", restart_count_);
  const int n = config_.nproc_per_node;
  workers_.resize(n);
  std::vector<std::string> argv = BuildWorkerArgv(config_);
  absl::Time t0 = EventLoop::Now();
  for (int local = 0; local < n; ++local) {
    Worker& w = workers_[local];
    w.placement = WorkerPlacement{local, local, 0, 1, n, n, local, n};
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
        w.output, WorkerOutput::Create(loop_.get(), console_.get(),
                                       ExpandPrefix(config_.log_line_prefix_template, config_.role,
                                                    w.placement, hostname_),
                                       out, err));
    SpawnSpec spec;
    spec.argv = argv;
    spec.env = BuildWorkerEnv(env_, config_, w.placement, round);
    spec.fds = {{w.output->child_stdout(), 1}, {w.output->child_stderr(), 2}};
    absl::StatusOr<pid_t> pid = Spawn(spec);
    w.output->CloseChildEnds();
    if (!pid.ok()) {
      int code = ExecFailureExitCode(pid.status());
      spdlog::error("cannot start local rank {}: {} (exit {})", local, pid.status().message(),
                    code);
      w.status = ExitStatus{code, 0};
      RecordFailure(w, code, std::string(pid.status().message()), ExitVerdict::kFatal);
      workers_.resize(local + 1);  // the rest were never started
      BeginStop(StopReason::kFailed, SIGTERM);
      return absl::OkStatus();
    }
    w.pid = *pid;
    watchdog_->Track(w.pid);
    events_->Write("worker_started", {{"attempt", restart_count_},
                                      {"local_rank", local},
                                      {"rank", w.placement.rank},
                                      {"pid", w.pid}});
  }
  spdlog::info(
      "attempt {}: started {} worker{} in {:.2f} ms (run id {}, master {}:{}, "
      "logs {})",
      restart_count_, n, n == 1 ? "" : "s", absl::ToDoubleMilliseconds(EventLoop::Now() - t0),
      run_id_, round.master_addr, round.master_port, attempt_dir);
  return absl::OkStatus();
}

void Agent::OnSignalFd() {
  signalfd_siginfo info;
  for (;;) {
    ssize_t n = read(signal_fd_.get(), &info, sizeof(info));
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof(info)) break;  // EAGAIN: drained
    int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      ReapChildren();  // one SIGCHLD may stand for many exits: reap them all
      continue;
    }
    if (phase_ == Phase::kDone) continue;
    if (agent_signal_ != 0) {
      spdlog::warn("received {} again while stopping: killing the workers now", SignalName(sig));
      Escalate();
      continue;
    }
    agent_signal_ = sig;
    events_->Write("signal_received", {{"signal", SignalName(sig)}});
    spdlog::info("received {}: forwarding it to every worker, SIGKILL after {}", SignalName(sig),
                 HumanDuration(config_.shutdown_timeout));
    BeginStop(StopReason::kSignaled, sig);
  }
}

void Agent::ReapChildren() {
  for (;;) {
    int wstatus = 0;
    pid_t pid = waitpid(-1, &wstatus, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) break;  // 0: children left but none exited; ECHILD: no children at all
    auto it = std::find_if(workers_.begin(), workers_.end(),
                           [pid](const Worker& w) { return w.pid == pid && !w.status; });
    if (it != workers_.end()) {
      OnWorkerExit(*it, ExitStatus::FromWaitStatus(wstatus));
    } else if (watchdog_ && pid == watchdog_->pid()) {
      spdlog::warn("watchdog (pid {}) exited unexpectedly", pid);
    } else {
      spdlog::debug("reaped orphan pid {} ({})", pid,
                    ExitStatus::FromWaitStatus(wstatus).Describe());
    }
  }
  if (phase_ == Phase::kStopping) MaybeFinishStop();
}

void Agent::OnWorkerExit(Worker& w, ExitStatus status) {
  w.status = status;
  events_->Write("worker_exited", {{"attempt", restart_count_},
                                   {"local_rank", w.placement.local_rank},
                                   {"rank", w.placement.rank},
                                   {"pid", w.pid},
                                   {"code", status.code()},
                                   {"signal", status.signal},
                                   {"while", phase_ == Phase::kRunning ? "running" : "stopping"}});
  if (phase_ != Phase::kRunning) {
    spdlog::debug("local rank {} (pid {}) stopped: {}", w.placement.local_rank, w.pid,
                  status.Describe());
    return;
  }
  ExitVerdict verdict =
      ClassifyExit(config_.restart_policy, config_.restartable_exit_codes, status.code());
  if (verdict == ExitVerdict::kSucceeded) {
    spdlog::debug("local rank {} (pid {}) exited 0", w.placement.local_rank, w.pid);
    bool all_done = std::all_of(workers_.begin(), workers_.end(),
                                [](const Worker& x) { return x.status && x.status->success(); });
    if (all_done) BeginStop(StopReason::kSucceeded, SIGTERM);
    return;
  }
  RecordFailure(w, status.code(), status.Describe(), verdict);
  BeginStop(StopReason::kFailed, SIGTERM);
}

void Agent::RecordFailure(const Worker& w, int code, std::string what, ExitVerdict verdict) {
  Failure f{w.placement, w.pid, code, std::move(what), verdict, std::nullopt};
  absl::StatusOr<std::optional<WorkerError>> error = ReadErrorFile(w.error_file);
  if (!error.ok()) {
    spdlog::warn("rank {}: {}", w.placement.rank, error.status().message());
  } else {
    f.error = *error;
  }
  spdlog::error("{} ({} policy: {})", DescribeFailure(f), RestartPolicyName(config_.restart_policy),
                ExitVerdictName(verdict));
  if (f.error && !f.error->traceback.empty()) {
    spdlog::error("rank {} traceback:\n{}", w.placement.rank, f.error->traceback);
  }
  root_cause_ = std::move(f);
}

std::string Agent::DescribeFailure(const Failure& f) const {
  std::string s = absl::StrCat("rank ", f.placement.rank, " (local_rank ", f.placement.local_rank,
                               ", pid ", f.pid, ", host ", hostname_, ") failed: ", f.what);
  if (f.error && !f.error->message.empty()) absl::StrAppend(&s, ": ", f.error->message);
  return s;
}

void Agent::BeginStop(StopReason reason, int sig) {
  if (phase_ == Phase::kStopping) {
    // A signal to the agent while a failure is being handled: the agent now
    // exits 128+N.
    if (reason == StopReason::kSignaled) {
      stop_reason_ = reason;
      if (stop_signal_ != SIGKILL) SignalLeftovers(sig);
    }
    return;
  }
  phase_ = Phase::kStopping;
  stop_reason_ = reason;
  stop_signal_ = sig;
  stop_started_ = EventLoop::Now();
  SignalLeftovers(sig);
  stop_timer_ = loop_->AddTimer(stop_started_ + config_.shutdown_timeout, [this] {
    stop_timer_ = 0;
    Escalate();
  });
  MaybeFinishStop();
}

void Agent::Escalate() {
  if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  stop_timer_ = 0;
  if (stop_signal_ == SIGKILL) return;
  spdlog::info("shutdown timeout ({}) reached: sending SIGKILL to what is left",
               HumanDuration(EventLoop::Now() - stop_started_));
  stop_signal_ = SIGKILL;
  SignalLeftovers(SIGKILL);
  loop_->AddTimer(EventLoop::Now() + kKillGrace, [this] {
    if (phase_ != Phase::kStopping) return;
    spdlog::error(
        "processes of the job survived SIGKILL for {} (uninterruptible "
        "sleep?); "
        "giving up on them",
        HumanDuration(kKillGrace));
    FinishAttempt();
  });
  MaybeFinishStop();
}

void Agent::SignalLeftovers(int sig) {
  std::set<pid_t> sessions;
  for (Worker& w : workers_) {
    if (w.pid == 0) continue;
    sessions.insert(w.pid);
    // ESRCH: the whole group is gone already, which is what we want.
    kill(-w.pid, sig);
  }
  if (sig == SIGKILL) {
    for (pid_t p : FindSessionMembers(sessions)) kill(p, SIGKILL);
  }
  // Orphans adopted by the agent (daemons a worker double-forked, children of
  // dead workers): they belong to the job too.
  for (pid_t child : ListChildren()) {
    if (child == watchdog_->pid()) continue;
    if (std::any_of(workers_.begin(), workers_.end(),
                    [child](const Worker& w) { return w.pid == child; })) {
      continue;  // signalled through its group above
    }
    kill(child, sig);
  }
}

void Agent::MaybeFinishStop() {
  if (phase_ != Phase::kStopping) return;
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
    // New orphans may have been adopted since the last round of signals; they
    // get the current one too. Their exits arrive as SIGCHLD and bring us back
    // here.
    SignalLeftovers(stop_signal_);
    return;
  }
  FinishAttempt();
}

void Agent::FinishAttempt() {
  if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  stop_timer_ = 0;
  store_.reset();  // the attempt's key space ends with it
  for (Worker& w : workers_) {
    if (w.output) w.output->Finish();
    if (w.pid != 0) watchdog_->Untrack(w.pid);
  }
  spdlog::debug("attempt {} stopped in {}", restart_count_,
                HumanDuration(EventLoop::Now() - stop_started_));
  switch (stop_reason_) {
    case StopReason::kSignaled:
      spdlog::info("stopped by {}; exiting {}", SignalName(agent_signal_), 128 + agent_signal_);
      return Finish(128 + agent_signal_);
    case StopReason::kSucceeded:
      if (RestartsAfterSuccess(config_.restart_policy) && restart_count_ < config_.max_restarts) {
        ++restart_count_;
        events_->Write("restart_decided", {{"attempt", restart_count_},
                                           {"reason", "all workers exited 0 (policy Always)"},
                                           {"restarts_used", restart_count_},
                                           {"max_restarts", config_.max_restarts}});
        spdlog::info(
            "all workers exited 0; restart policy Always: starting attempt {} ({} of {} restarts "
            "used)",
            restart_count_, restart_count_, config_.max_restarts);
        break;
      }
      spdlog::info("job succeeded: {} worker{} exited 0 (attempt {})", workers_.size(),
                   workers_.size() == 1 ? "" : "s", restart_count_);
      return Finish(0);
    case StopReason::kFailed: {
      const Failure& f = *root_cause_;
      if (f.verdict == ExitVerdict::kRestartable && restart_count_ < config_.max_restarts) {
        ++restart_count_;
        events_->Write("restart_decided", {{"attempt", restart_count_},
                                           {"reason", f.what},
                                           {"rank", f.placement.rank},
                                           {"code", f.code},
                                           {"restarts_used", restart_count_},
                                           {"max_restarts", config_.max_restarts}});
        spdlog::info("restarting all {} local workers: attempt {} ({} of {} restarts used)",
                     workers_.size(), restart_count_, restart_count_, config_.max_restarts);
        break;
      }
      std::string why = f.verdict == ExitVerdict::kRestartable
                            ? absl::StrCat("restart budget spent (", restart_count_, " of ",
                                           config_.max_restarts, " restarts used)")
                            : absl::StrCat("not restartable under policy ",
                                           RestartPolicyName(config_.restart_policy));
      if (auto it = env_.find("TORCHELASTIC_ERROR_FILE"); it != env_.end() && !it->second.empty()) {
        WorkerError e = f.error.value_or(WorkerError{f.what, "", absl::ToUnixSeconds(absl::Now())});
        absl::Status st = WriteAgentErrorFile(it->second, e, f.code);
        if (!st.ok()) spdlog::warn("cannot write TORCHELASTIC_ERROR_FILE: {}", st.message());
      }
      spdlog::error("job failed: {}; {}; exiting {}", DescribeFailure(f), why, f.code);
      return Finish(f.code);
    }
  }
  absl::Status st = StartAttempt();
  if (!st.ok()) {
    spdlog::error("cannot start attempt {}: {}", restart_count_, st.message());
    SignalLeftovers(SIGKILL);
    Finish(1);
  }
}

void Agent::Finish(int exit_code) {
  phase_ = Phase::kDone;
  exit_code_ = exit_code;
  nlohmann::json fields = {{"exit_code", exit_code}, {"attempt", restart_count_}};
  if (root_cause_) {
    fields["root_cause"] = {{"rank", root_cause_->placement.rank},
                            {"local_rank", root_cause_->placement.local_rank},
                            {"pid", root_cause_->pid},
                            {"host", hostname_},
                            {"code", root_cause_->code},
                            {"what", root_cause_->what},
                            {"message", root_cause_->error ? root_cause_->error->message : ""}};
  }
  if (events_) events_->Write("job_finished", fields);
}

int Agent::Run() {
  absl::Status st = Setup();
  if (!st.ok()) {
    spdlog::error("agent setup failed: {}", st.message());
    return 1;
  }
  st = StartAttempt();
  if (!st.ok()) {
    spdlog::error("cannot start workers: {}", st.message());
    SignalLeftovers(SIGKILL);
    Finish(1);
  }
  while (!exit_code_) {
    st = loop_->RunOnce();
    if (!st.ok()) {
      spdlog::error("event loop failed: {}; stopping the workers", st.message());
      SignalLeftovers(SIGKILL);
      Finish(1);
    }
  }
  console_.reset();  // drains worker output before the agent's last words
  if (watchdog_) {
    watchdog_->Disarm();
    int wstatus;
    // The watchdog exits at once on Disarm; reap it so we leave no zombie
    // behind.
    while (waitpid(watchdog_->pid(), &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  if (remove_log_root_) RemoveTree(log_root_);
  return *exit_code_;
}

}  // namespace muster
