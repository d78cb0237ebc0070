#include "agent/lifecycle/agent.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/config/this_host.h"
#include "agent/diagnostics/gpu_probe.h"
#include "agent/diagnostics/hang_watch.h"
#include "agent/lifecycle/debug_dir_owner.h"
#include "agent/lifecycle/failure_report.h"
#include "agent/lifecycle/run_dir.h"
#include "agent/workers/debug_mode.h"
#include "agent/workers/worker_env.h"
#include "agent/workers/worker_specs.h"
#include "base/duration.h"
#include "base/errno_status.h"
#include "base/exit_codes.h"
#include "base/log_format.h"
#include "base/logging.h"
#include "base/random_id.h"
#include "base/shell_words.h"
#include "base/status_macros.h"
#include "base/wire_values.h"
#include "launch/cpu_topology.h"
#include "launch/restart_policy.h"
#include "launch/stuck_process.h"
#include "launch/supervisor.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// A worker's end as the job's status shows it (the signal comes from the group's record).
rdzv::EndedWorker EndedWorkerOf(const WorkerExit& e) {
  return rdzv::EndedWorker{.local_rank = e.placement.local_rank,
                           .pid = e.pid,
                           .code = e.code,
                           .signal = e.signal,
                           // proto3 string: a command's path may be any bytes
                           .what = ToValidUtf8(e.what),
                           .stopped = e.while_stopping};
}

// --master-port given on the command line where the store's port is not it (several
// nodes with --rdzv-endpoint, --store agent: the store shares the endpoint's port).
// Without --rdzv-endpoint --master-port is the endpoint's port (torchrun's static form).
void WarnIfMasterPortUnused(const Config& c) {
  auto where = c.sources.find("master-port");
  if (c.store != StoreOwner::kAgent || c.max_nodes == 1 || c.static_rendezvous ||
      where == c.sources.end() || where->second.rfind("--", 0) != 0) {
    return;
  }
  spdlog::warn(
      "{} {} is not used: with several nodes the store is the group rank 0 agent's, on the "
      "port of --rdzv-endpoint when that agent serves the rendezvous; --store rank0 makes "
      "worker rank 0 bind {} as torchrun's static store does",
      where->second, c.master_port, c.master_port);
}

}  // namespace

Agent::Agent(RunPlan plan, AgentParts parts)
    : plan_(std::move(plan)),
      parts_(std::move(parts)),
      loop_(parts_.loop.get()),
      launcher_(parts_.launcher.get()),
      rdzv_(parts_.rendezvous.get()) {}

Agent::~Agent() { ReleaseDebugDirIfHeld(); }

void Agent::Add(std::unique_ptr<AgentComponent> component) {
  components_.push_back(std::move(component));
}

void Agent::ReleaseDebugDirIfHeld() {
  if (!debug_dir_lock_.valid()) return;
  ReleaseDebugDir(config_.debug_dir);
  debug_dir_lock_.reset();
}

absl::Status Agent::Setup() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return ErrnoStatus("gethostname", errno);
  // The hostname names this node in the rendezvous protocol (proto3 strings: UTF-8 only) and
  // the kernel takes any bytes: a name that is not clean text is used escaped.
  hostname_ = WireHostname(host);
  if (hostname_ != host) spdlog::warn("hostname is not UTF-8 text; this node is {}", hostname_);
  ASSIGN_OR_RETURN(events_, EventLog::Open(config_.event_log));
  RETURN_IF_ERROR(CheckDirectoryOf("--status-file", config_.status_file));
  status_file_ = std::make_unique<StatusFile>(config_.status_file);
  RETURN_IF_ERROR(loop_->Add(parts_.signal_fd.get(), EPOLLIN, [this](uint32_t) { OnSignalFd(); }));
  RETURN_IF_ERROR(PrepareRunDir());
  if (config_.debug) {
    RETURN_IF_ERROR(CheckDebugPort(config_));
    absl::StatusOr<UniqueFd> lock = ClaimDebugDir(config_.debug_dir);
    if (!lock.ok()) {
      return absl::Status(lock.status().code(),
                          absl::StrCat("--debug-dir ", lock.status().message()));
    }
    debug_dir_lock_ = *std::move(lock);
  }
  launcher_->SetCallbacks({.on_exit = [this](const WorkerExit& e) { OnWorkerExit(e); },
                           .on_stopped = [this] { OnWorkersStopped(); }});
  node_.node_id = absl::StrCat(hostname_, ":", getpid(), ":", RandomHex(4));
  node_.host = hostname_;
  node_.local_world_size = plan_.workers.nproc;
  node_.rank_hint = config_.node_rank;
  // The store that shares the rendezvous port is this agent's: group rank 0's store
  // serves the round, so this agent takes that place unless a node rank was given.
  if (node_.rank_hint < 0 && parts_.store_shares_rendezvous_port) node_.rank_hint = 0;
  node_.wants_node_list = !config_.hostfile.empty() || config_.debug;  // writes a hostfile
  node_.probe = ProbeLine(plan_.probe_report);
  // Status text travels in proto3 strings (UTF-8 only): a path that is not is shown escaped.
  auto utf8 = [](const std::string& s) { return IsValidUtf8(s) ? s : EscapeForMessage(s); };
  node_.command =
      utf8(config_.debug ? "(debug mode)" : ShellJoin(BuildWorkerArgv(config_, plan_.workers)));
  node_.log_dir = utf8(run_dir_.stream_files || !config_.log_dir.empty() ? run_dir_.path : "");
  node_.containment = utf8(launcher_->containment());
  node_.address = AdvertisedAddress(config_);
  if (node_.address.empty()) node_.address = parts_.store_address;  // what the store binds
  WarnIfMasterPortUnused(config_);
  ASSIGN_OR_RETURN(node_.store_port, OpenFreshStore());
  hang_ = HangWatch::ForConfig(config_, plan_.workers, run_dir_.path, loop_, launcher_, rdzv_,
                               events_.get());
  for (const std::unique_ptr<AgentComponent>& c : components_) RETURN_IF_ERROR(c->Start(*this));
  if (!config_.save_pid.empty()) {
    absl::Status st = WriteFileAtomically(config_.save_pid, absl::StrCat(KnownPid(), "\n"));
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("--save-pid: ", st.message()));
  }
  return absl::OkStatus();
}

absl::Status Agent::PrepareRunDir() {
  ASSIGN_OR_RETURN(run_dir_, MakeRunDir(plan_));
  return absl::OkStatus();
}

absl::StatusOr<int> Agent::OpenFreshStore() {
  store_.reset();  // the previous round's key space ends here
  if (config_.store != StoreOwner::kAgent || !parts_.store_factory) return 0;  // never serves
  const int port = FixedStorePort(config_);
  absl::StatusOr<std::unique_ptr<c10d::StoreServer>> store = parts_.store_factory(port);
  if (!store.ok() && port != 0) {
    return absl::Status(
        store.status().code(),
        absl::StrCat(config_.SourceOf("master-port"), " ", port,
                     ": the store cannot listen there (", store.status().message(),
                     "); pick a free port, or leave --master-port out for any free one"));
  }
  if (!store.ok()) return store.status();
  store_ = *std::move(store);
  return static_cast<int>(store_->port());
}

void Agent::OnSignalFd() {
  signalfd_siginfo info;
  for (;;) {
    ssize_t n = read(parts_.signal_fd.get(), &info, sizeof(info));
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof(info)) break;  // EAGAIN: drained
    int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      launcher_->OnChildSignal();  // one SIGCHLD may stand for many exits: it reaps them all
    } else if (!done()) {
      OnAgentSignal(sig);
    }
  }
}

void Agent::OnAgentSignal(int sig) {
  if (agent_signal_ != 0) {
    spdlog::warn("received {} again while stopping: killing the workers now", SignalName(sig));
    for (const std::unique_ptr<AgentComponent>& c : components_) c->OnSignal(sig, /*first=*/false);
    launcher_->Escalate();
    return;
  }
  agent_signal_ = sig;
  events_->Write("signal_received", {{"signal", SignalName(sig)}});
  for (const std::unique_ptr<AgentComponent>& c : components_) {
    if (c->OnSignal(sig, /*first=*/true)) return;
  }
  if (launcher_->running() || launcher_->stopping()) {
    spdlog::info("received {}: forwarding it to every worker, SIGKILL after {}", SignalName(sig),
                 HumanDuration(config_.shutdown_timeout));
  } else {
    spdlog::info("received {} before any worker started: leaving the job", SignalName(sig));
  }
  rdzv_->Leave(absl::StrCat("agent received ", SignalName(sig)));
  int code = exit_code::ForSignal(sig);
  ExitAfterStop(
      {.code = code, .summary = absl::StrCat("stopped by ", SignalName(sig), "; exiting ", code)},
      sig);
}

void Agent::OnWorkerExit(const WorkerExit& e) {
  if (events_->enabled()) {  // the fields cost allocations per worker even when unused
    events_->Write("worker_exited", {{"attempt", restart_count_},
                                     {"local_rank", e.placement.local_rank},
                                     {"rank", e.placement.rank},
                                     {"pid", e.pid},
                                     {"code", e.code},
                                     {"signal", e.signal},
                                     {"while", e.while_stopping ? "stopping" : "running"}});
  }
  Publish();
  if (config_.debug && !e.while_stopping) {
    // The debug command is the Pod's main process: its end is the agent's end.
    ExitAfterStop({.code = e.code,
                   .summary = absl::StrCat("debug command ended: ", e.what, "; exiting ", e.code),
                   .is_error = e.code != 0});
    return;
  }
  if (!config_.debug) rdzv_->ReportWorkerEnded(round_, EndedWorkerOf(e));
  for (const std::unique_ptr<AgentComponent>& c : components_) {
    if (c->OnWorkerExit(e)) return;  // no restart decision for it
  }
  if (e.while_stopping || !launcher_->running()) {
    spdlog::debug("local rank {} (pid {}) stopped: {}", e.placement.local_rank, e.pid, e.what);
    return;
  }
  ExitVerdict verdict =
      e.exec_failed ? ExitVerdict::kFatal
                    : ClassifyExit(config_.restart_policy, config_.restartable_exit_codes, e.code);
  if (verdict == ExitVerdict::kSucceeded) {
    spdlog::debug("local rank {} (pid {}) exited 0", e.placement.local_rank, e.pid);
    if (launcher_->AllSucceeded()) {
      rdzv_->ReportSucceeded(round_);
      StopWorkers(Phase::kCleaningUp, SIGTERM);  // whatever the workers left behind
    }
    return;
  }
  rdzv::Failure failure = FailureOf(e, node_, verdict == ExitVerdict::kRestartable);
  spdlog::error("{} ({} policy: {})", FailedWorkerLine(failure),
                RestartPolicyName(config_.restart_policy), ExitVerdictName(verdict));
  if (e.error && !e.error->traceback.empty()) {
    spdlog::error("rank {} traceback:\n{}", e.placement.rank, e.error->traceback);
  }
  rdzv_->ReportFailure(round_, failure);
  StopWorkers(Phase::kRestarting, SIGTERM);  // at once: no need to wait for the job's word
}

void Agent::StopWorkers(Phase next, int sig) {
  bool stopping =
      phase_ == Phase::kCleaningUp || phase_ == Phase::kRestarting || phase_ == Phase::kExiting;
  if (!stopping || next == Phase::kExiting) phase_ = next;
  if (hang_) hang_->Stop();
  if (next == Phase::kRestarting) {
    launcher_->StopWithin(sig, config_.RestartGrace());  // --restart-grace
  } else {
    launcher_->Stop(sig);
  }
  Publish();
}

void Agent::OnWorkersStopped() {
  if (done()) return;  // a late report of a stop already handled
  if (std::vector<StuckProcess> stuck = launcher_->Stuck(); !stuck.empty()) OnStuck(stuck);
  switch (phase_) {
    case Phase::kExiting:
      return Finish();
    case Phase::kCleaningUp:
      phase_ = Phase::kAtBarrier;  // the job's word decides what follows
      return;
    case Phase::kRestarting:
      // Before the stop report: the next round may follow it at once.
      for (const std::unique_ptr<AgentComponent>& c : components_) c->OnRoundStopped();
      return ReportStopped();
    default:
      return;  // a stop that found nothing running
  }
}

void Agent::OnStuck(const std::vector<StuckProcess>& stuck) {
  const rdzv::Failure f = StuckFailure(stuck, node_);
  nlohmann::json processes = nlohmann::json::array();
  for (const StuckProcess& p : stuck) {
    processes.push_back(
        {{"pid", p.pid}, {"rank", p.rank}, {"state", std::string(1, p.state)}, {"wchan", p.wchan}});
  }
  events_->Write("workers_stuck", {{"processes", processes}});
  if (phase_ == Phase::kExiting) return AddToSummary(f.what);  // the first reason stays
  // No next round on this node while they hold what they hold (GPU memory, files): it leaves
  // the job, which goes on without it or ends (docs/guides/stopping-workers.md).
  WriteRootCauseErrorFile(plan_.workers.env_base,
                          rdzv::Outcome{.exit_code = f.code, .root_cause = f, .reason = f.what});
  rdzv_->Leave(f.what);
  phase_ = Phase::kExiting;
  if (!exit_plan_) {
    exit_plan_ =
        ExitPlan{.code = f.code,
                 .summary = absl::StrCat(f.what, "; this node leaves the job; exiting ", f.code),
                 .is_error = true};
  }
}

void Agent::ReportStopped() {
  phase_ = Phase::kRendezvous;
  absl::StatusOr<int> port = OpenFreshStore();
  if (!port.ok()) {
    ExitAfterStop({.code = exit_code::ForStatus(port.status()),
                   .summary = absl::StrCat("cannot open a store for the next round: ",
                                           port.status().message()),
                   .is_error = true});
    return;
  }
  for (const std::unique_ptr<AgentComponent>& c : components_) c->BeforeJoin(node_, false);
  rdzv_->ReportStopped(round_, *port);
}

void Agent::OnRendezvousEvent(const rdzv::Event& e) {
  if (done()) return;
  for (const std::unique_ptr<AgentComponent>& c : components_) {
    if (c->OnRendezvousEvent(e)) return;
  }
  if (hang_) hang_->OnJobEvent(e);  // a hang's stacks file, before the workers stop
  switch (e.kind) {
    case rdzv::Event::Kind::kProgress:
      spdlog::info("rendezvous: {}", e.text);
      return;
    case rdzv::Event::Kind::kRoundStarted:
      return StartRound(e.assignment);
    case rdzv::Event::Kind::kStopWorkers:
      return OnStopRequested(e);
    case rdzv::Event::Kind::kFinished:
      return OnFinished(e.outcome);
    case rdzv::Event::Kind::kPreempt:  // for the components (without one: no notice)
    case rdzv::Event::Kind::kTraces:
    case rdzv::Event::Kind::kStraggler:
      return;
  }
}

void Agent::OnStopRequested(const rdzv::Event& e) {
  last_stop_ = e;
  if (launcher_->running()) {
    spdlog::info("stopping local workers: {}", e.text);
    StopWorkers(Phase::kRestarting, SIGTERM);
  } else if (phase_ == Phase::kCleaningUp) {
    phase_ = Phase::kRestarting;  // report stopped once the clean-up is done
  } else if (phase_ != Phase::kRestarting && phase_ != Phase::kExiting) {
    ReportStopped();  // already stopped: waiting at the exit barrier
  }
}

void Agent::OnFinished(const rdzv::Outcome& o) {
  outcome_ = o;
  WriteRootCauseErrorFile(plan_.workers.env_base, o);
  if (o.exit_code == 0) {
    ExitAfterStop({.summary = absl::StrCat("job succeeded: ", o.reason)});
  } else {
    const int code = FailedJobExitCode(o, config_.fatal_exit_code);
    std::string summary = absl::StrCat("job failed: ", o.reason, "; exiting ", code);
    if (code != o.exit_code) {
      absl::StrAppend(&summary, " (--fatal-exit-code; the root cause's code is ", o.exit_code, ")");
    }
    if (o.root_cause && !o.root_cause->restartable && config_.max_restarts > 0 &&
        config_.restart_policy == RestartPolicy::kExitCode &&
        o.root_cause->kind != rdzv::FailureKind::kHung) {
      // Users coming from torchrun expect any failure to restart while the budget lasts.
      absl::StrAppend(&summary, " (--restart-policy ExitCode restarts only on ",
                      absl::StrJoin(config_.restartable_exit_codes, ", "),
                      "; --restart-policy OnFailure restarts on any failure, as torchrun does)");
    }
    ExitAfterStop({.code = code,
                   .summary = std::move(summary),
                   .details = o.root_cause ? StderrBlock(*o.root_cause) : "",
                   .is_error = true});
  }
}

void Agent::OnRendezvousError(const rdzv::RendezvousError& error) {
  int code = exit_code::ForStatus(error.status);
  ExitAfterStop(
      {.code = code,
       .summary = absl::StrCat("rendezvous failed: ", error.status.message(), "; exiting ", code),
       .is_error = true});
  for (const std::unique_ptr<AgentComponent>& c : components_) c->OnRendezvousError(error);
}

void Agent::StartRound(const rdzv::Assignment& a) {
  // With several nodes, agents may share a console (several on one machine, or their logs
  // gathered): each line then says which node it comes from.
  SetLogNodeTag(a.group_world_size > 1 ? absl::StrCat("node ", a.group_rank) : "");
  LogRestart(a);
  round_ = a.round;
  restart_count_ = a.restart_count;
  assignment_ = a;
  // Only group rank 0's store serves the round; the others close theirs.
  if (a.group_rank != 0) store_.reset();
  int free_port = 0;
  if (NeedsFreeMasterPort(config_)) {
    absl::StatusOr<int> port = PickFreePort();
    if (!port.ok()) {
      ExitAfterStop(
          {.code = exit_code::ForStatus(port.status()),
           .summary = absl::StrCat("cannot pick a master port: ", port.status().message()),
           .is_error = true});
      return;
    }
    free_port = *port;
  }
  if (!config_.hostfile.empty()) {
    absl::Status hs = WriteFileAtomically(config_.hostfile, HostfileText(a));
    if (!hs.ok()) spdlog::warn("cannot write --hostfile: {}", hs.message());
  }
  CpuLayout cpus;
  if (config_.bind_cores_to_rank) {
    cpus.available = config_.bind_core_list.empty() ? AffinityCpus() : config_.bind_core_list;
    cpus.numa_of = NumaNodeOfCpu();
  }
  NodeRound round = PlanNodeRound(config_, a, plan_.run_id, free_port);
  std::vector<WorkerSpec> specs = BuildWorkerSpecs(plan_, round, run_dir_.path, hostname_, cpus);
  if (config_.debug) return StartDebugCommand(a, specs);
  StartWorkers(round, std::move(specs));
}

void Agent::StartWorkers(const NodeRound& round, std::vector<WorkerSpec> specs) {
  phase_ = Phase::kRunning;
  absl::Time t0 = EventLoop::Now();
  absl::Status st = launcher_->Start(round.info.restart_count, std::move(specs));
  if (!st.ok()) {
    ExitAfterStop({.code = exit_code::ForStatus(st),
                   .summary = absl::StrCat("cannot start workers: ", st.message()),
                   .is_error = true},
                  SIGKILL);
    return;
  }
  std::vector<WorkerView> workers = launcher_->Workers();
  const int n = plan_.workers.nproc;
  // A worker that could not be started has no pid; its failure follows through OnWorkerExit.
  const size_t count =
      std::count_if(workers.begin(), workers.end(), [](const WorkerView& w) { return w.pid > 0; });
  spdlog::info(
      "attempt {} (round {}): started {} worker{} in {:.2f} ms (ranks {}..{} of {}, master {}:{})",
      round.info.restart_count, round_, count, count == 1 ? "" : "s",
      absl::ToDoubleMilliseconds(EventLoop::Now() - t0), round.rank_base, round.rank_base + n - 1,
      round.world_size, round.info.master_addr, round.info.master_port);
  // The job's status shows the pids (docs/design.md §4.6). A worker that could not be executed has
  // none; its exit follows through OnWorkerExit.
  std::vector<rdzv::StartedWorker> started;
  for (const WorkerView& w : workers) {
    if (w.pid <= 0) continue;
    started.push_back(
        {w.placement.local_rank, w.placement.rank, w.pid, WorkerStartName(w.start), w.fallback});
    if (events_->enabled()) {
      nlohmann::json fields = {{"attempt", round.info.restart_count},
                               {"local_rank", w.placement.local_rank},
                               {"rank", w.placement.rank},
                               {"pid", w.pid},
                               {"start", WorkerStartName(w.start)}};
      if (!w.fallback.empty()) fields["fallback"] = w.fallback;
      events_->Write("worker_started", fields);
    }
  }
  rdzv_->ReportWorkersStarted(round_, started);
  if (hang_) hang_->Start(round_);
  Publish();
}

void Agent::StartDebugCommand(const rdzv::Assignment& a, const std::vector<WorkerSpec>& specs) {
  absl::StatusOr<std::string> command = PrepareDebugRound(config_, plan_.workers, a, specs);
  if (!command.ok()) {
    ExitAfterStop({.code = exit_code::kUsage,
                   .summary = std::string(command.status().message()),
                   .is_error = true});
    return;
  }
  std::vector<std::string> env;
  env.reserve(plan_.workers.env_base.size());
  for (const auto& [k, v] : plan_.workers.env_base) env.push_back(absl::StrCat(k, "=", v));
  phase_ = Phase::kDebug;
  absl::Status st = launcher_->StartCommand({"/bin/sh", "-c", *command}, std::move(env));
  if (!st.ok()) {
    ExitAfterStop({.code = exit_code::ForStatus(st),
                   .summary = absl::StrCat("cannot start the debug command: ", st.message()),
                   .is_error = true});
    return;
  }
  Publish();
}

bool Agent::ClaimStop(int sig) {
  if (done() || agent_signal_ != 0) return false;
  agent_signal_ = sig;  // a second notice (a signal) kills, as a second signal does
  return true;
}

void Agent::ExitAfterStop(int code, std::string summary, int sig) {
  ExitAfterStop({.code = code, .summary = std::move(summary)}, sig);
}

void Agent::AddToSummary(const std::string& line) {
  if (exit_plan_) absl::StrAppend(&exit_plan_->summary, "; ", line);
}

void Agent::ExitAfterStop(ExitPlan plan, int sig) {
  if (!exit_plan_) exit_plan_ = std::move(plan);  // the first reason to exit is the one
  if (launcher_->running() || launcher_->stopping()) {
    StopWorkers(Phase::kExiting, sig);  // while stopping: forwards a new signal
  } else {
    Finish();
  }
}

void Agent::Finish() {
  if (done()) return;
  for (const std::unique_ptr<AgentComponent>& c : components_) {
    if (c->HoldFinish()) return;
  }
  const int code = exit_plan_ ? exit_plan_->code : exit_code::kTransient;
  phase_ = code == 0 ? Phase::kSucceeded : Phase::kFailed;
  Publish();
  nlohmann::json fields = {{"exit_code", code}, {"attempt", restart_count_}, {"round", round_}};
  if (outcome_ && outcome_->root_cause) fields["root_cause"] = FailureJson(*outcome_->root_cause);
  events_->Write("job_finished", fields);
}

int Agent::Run() {
  absl::Status st = Setup();
  if (!st.ok()) {
    // Through the same teardown as any end: nothing made so far is left behind, and the
    // reason reaches the termination log.
    exit_plan_ = ExitPlan{.code = exit_code::ForStatus(st),
                          .summary = absl::StrCat("agent setup failed: ", st.message(),
                                                  "; exiting ", exit_code::ForStatus(st)),
                          .is_error = true};
    phase_ = Phase::kFailed;
    Teardown();
    return exit_plan_->code;
  }
  rdzv::JobSpec spec{
      .run_id = plan_.run_id,
      .min_nodes = config_.min_nodes,
      .max_nodes = config_.max_nodes,
      .max_restarts = config_.max_restarts,
      .spares = config_.spares,
      .restart_after_success = RestartsAfterSuccess(config_.restart_policy),
      .join_timeout = config_.join_timeout,
      .last_call_timeout = config_.last_call_timeout,
      .heartbeat_interval = config_.heartbeat_interval,
      .heartbeat_misses = config_.heartbeat_misses,
      // Agents stop their workers for a restart within --restart-grace plus the SIGKILL grace.
      .stop_timeout =
          std::max(config_.shutdown_timeout, config_.RestartGrace()) + absl::Seconds(30),
      .quarantine_after = config_.quarantine_after,
  };
  phase_ = Phase::kRendezvous;
  for (const std::unique_ptr<AgentComponent>& c : components_) c->BeforeJoin(node_, true);
  Publish();
  rdzv_->Start(
      node_, spec, [this](const rdzv::Event& e) { OnRendezvousEvent(e); },
      [this](const rdzv::RendezvousError& e) { OnRendezvousError(e); });
  while (!done()) {
    st = loop_->RunOnce();
    if (!st.ok()) {
      spdlog::error("event loop failed: {}; killing the workers", st.message());
      launcher_->Stop(SIGKILL);
      if (!exit_plan_) exit_plan_ = ExitPlan{};
      exit_plan_->code = exit_code::kTransient;
      Finish();
    }
  }
  Teardown();
  return exit_plan_->code;
}

void Agent::Teardown() {
  // The helpers are told first and waited for last, so that they wind down while the agent
  // does its own work: each hand-off to another task is a wake-up, which on a busy machine
  // can cost a scheduler time slice (B8). Every worker is reaped by now.
  hang_.reset();  // before the rendezvous client it reports to
  if (store_) store_->BeginShutdown();
  launcher_->BeginShutdown();
  rdzv_ = nullptr;
  parts_.rendezvous.reset();  // our own stream ends here
  if (parts_.hosted_rendezvous) {
    // Other agents learn the outcome through this process: give them time to hear it
    // and hang up before the server goes away.
    if (!parts_.hosted_rendezvous->WaitForAgentsToLeave(node_.node_id, absl::Seconds(10))) {
      spdlog::warn("some agents were still connected 10 s after the job ended");
    }
    parts_.hosted_rendezvous.reset();
  }
  ReleaseDebugDirIfHeld();
  const bool kept_logs =
      CleanUpRunDir(run_dir_, /*job_failed=*/outcome_ && outcome_->exit_code != 0);
  const ExitPlan& plan = *exit_plan_;
  WriteTerminationLog(config_.termination_log, TerminationLogText(plan.summary, plan.details));
  store_.reset();  // its thread has had the time above to end
  launcher_->FinishShutdown();
  // After the workers' last output; the summary stays the last line.
  if (kept_logs) spdlog::info("logs of the failed job kept in {}", run_dir_.path);
  if (!plan.details.empty()) spdlog::error("{}", plan.details);
  if (plan.is_error) {
    spdlog::error("{}", plan.summary);
  } else if (!plan.summary.empty()) {
    spdlog::info("{}", plan.summary);
  }
}

}  // namespace muster
