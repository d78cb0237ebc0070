#include "agent/agent.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/debug_mode.h"
#include "agent/endpoint.h"
#include "agent/gpu_probe.h"
#include "agent/remove_tree.h"
#include "agent/wire_values.h"
#include "base/duration.h"
#include "base/errno_status.h"
#include "base/log_format.h"
#include "base/status_macros.h"
#include "launch/error_file.h"
#include "launch/process_tree.h"
#include "launch/restart_policy.h"
#include "launch/signals.h"
#include "rendezvous/grpc/client.h"
#include "rendezvous/local_client.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

std::string RandomHex(int bytes) {
  unsigned char buf[32];
  if (getrandom(buf, bytes, 0) != bytes) {
    // getrandom on Linux >= 3.17 does not fail for <= 256 bytes; fall back to the clock.
    uint64_t t = absl::ToUnixNanos(absl::Now()) ^ getpid();
    std::memcpy(buf, &t, std::min<int>(bytes, sizeof(t)));
  }
  std::string out;
  for (int i = 0; i < bytes; ++i) absl::StrAppendFormat(&out, "%02x", buf[i]);
  return out;
}

std::string Uuid4() {
  std::string h = RandomHex(16);
  h[12] = '4';                        // version 4
  h[16] = "89ab"[(h[16] - '0') & 3];  // RFC 4122 variant
  return absl::StrCat(h.substr(0, 8), "-", h.substr(8, 4), "-", h.substr(12, 4), "-",
                      h.substr(16, 4), "-", h.substr(20, 12));
}

// A free TCP port on 127.0.0.1 (bind to 0, read it back, close): what torchrun's
// --standalone does for a static store (--store rank0). It can race; --store agent does not.
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

// Where the agent's store listens: only where workers must reach it. A numeric address
// is bound as is (127.0.0.1 by default: loopback only); a hostname could resolve to any
// local address, so it gets the dual-stack wildcard.
std::string StoreBindAddress(const std::string& addr) {
  if (addr == "localhost") return "127.0.0.1";
  in6_addr v6;
  in_addr v4;
  if (inet_pton(AF_INET, addr.c_str(), &v4) == 1 || inet_pton(AF_INET6, addr.c_str(), &v6) == 1) {
    return addr;
  }
  return "::";
}

// Whether `host` names this machine: loopback, our hostname, or one of our interfaces'
// addresses. Decides --rdzv-host auto without any DNS lookup (which could block).
bool IsThisHost(const std::string& host, const std::string& hostname) {
  if (host == "localhost" || host == hostname) return true;
  in_addr v4;
  in6_addr v6;
  bool is_v4 = inet_pton(AF_INET, host.c_str(), &v4) == 1;
  bool is_v6 = !is_v4 && inet_pton(AF_INET6, host.c_str(), &v6) == 1;
  if (!is_v4 && !is_v6) return false;
  if (is_v4 && (ntohl(v4.s_addr) >> 24) == 127) return true;
  if (is_v6 && IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  ifaddrs* addrs = nullptr;
  if (getifaddrs(&addrs) != 0) return false;
  bool found = false;
  for (ifaddrs* a = addrs; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    if (is_v4 && a->ifa_addr->sa_family == AF_INET) {
      found = reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == v4.s_addr;
    } else if (is_v6 && a->ifa_addr->sa_family == AF_INET6) {
      found =
          memcmp(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, &v6, sizeof(v6)) == 0;
    }
  }
  freeifaddrs(addrs);
  return found;
}

// Permanent rendezvous problems are configuration errors (exit 2); the rest are transient
// agent-level failures worth a Pod restart (138).
int ExitCodeForRendezvousError(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return 2;
    default:
      return 138;
  }
}

// A worker's end as the job's status shows it (the signal comes from the group's record).
rdzv::EndedWorker EndedWorkerOf(const WorkerExit& e) {
  rdzv::EndedWorker ended;
  ended.local_rank = e.placement.local_rank;
  ended.pid = e.pid;
  ended.code = e.code;
  ended.what = ToValidUtf8(e.what);  // proto3 string: a command's path may be any bytes
  ended.stopped = e.while_stopping;
  ended.signal = e.signal;
  return ended;
}

}  // namespace

Agent::Agent(Config config) : config_(std::move(config)) {}

Agent::~Agent() = default;

absl::Status Agent::Setup() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return ErrnoStatus("gethostname", errno);
  // The hostname names this node in the rendezvous protocol (proto3 strings: UTF-8 only) and
  // the kernel takes any bytes: a name that is not clean text is used escaped.
  hostname_ = WireHostname(host);
  if (hostname_ != host) spdlog::warn("hostname is not UTF-8 text; this node is {}", hostname_);
  ASSIGN_OR_RETURN(events_, EventLog::Open(config_.event_log));
  status_file_ = std::make_unique<StatusFile>(config_.status_file);
  // Order matters: signals are blocked before the watchdog forks and before any thread
  // starts, so none of them ever receives the job's signals asynchronously.
  ASSIGN_OR_RETURN(signal_fd_, BlockAndOpenSignalFd(config_.signals_to_handle));
  RETURN_IF_ERROR(BecomeSubreaper());
  ASSIGN_OR_RETURN(watchdog_, Watchdog::Start());
  ASSIGN_OR_RETURN(console_, ConsoleWriter::Start());
  ASSIGN_OR_RETURN(loop_, EventLoop::Create());
  RETURN_IF_ERROR(loop_->Add(signal_fd_.get(), EPOLLIN, [this](uint32_t) { OnSignalFd(); }));
  run_id_ = config_.run_id;
  if (config_.standalone && run_id_ == "none") run_id_ = Uuid4();  // like torchrun
  RETURN_IF_ERROR(PrepareRunDir());
  group_ = std::make_unique<WorkerGroup>(
      config_, hostname_, run_dir_, loop_.get(), console_.get(), watchdog_.get(), events_.get(),
      WorkerGroup::Callbacks{[this](const WorkerExit& e) { OnWorkerExit(e); },
                             [this] { OnWorkersStopped(); }});
  RETURN_IF_ERROR(loop_->Add(console_->space_fd(), EPOLLIN, [this](uint32_t) {
    uint64_t n;
    // EAGAIN: another wake-up already consumed the counter; nothing to do.
    [[maybe_unused]] ssize_t r = read(console_->space_fd(), &n, sizeof(n));
    group_->ResumeOutput();
  }));
  node_.node_id = absl::StrCat(hostname_, ":", getpid(), ":", RandomHex(4));
  node_.host = hostname_;
  node_.local_world_size = config_.nproc_per_node;
  node_.rank_hint = config_.node_rank;
  node_.wants_node_list = !config_.hostfile.empty() || config_.debug;  // writes a hostfile
  node_.probe = ProbeLine(config_.probe_summary);
  if (config_.rdzv_host_name.empty()) {
    node_.address = config_.master_addr;
    rdzv_ = std::make_unique<rdzv::LocalRendezvous>(loop_.get());
  } else {
    // Empty when neither --local-addr nor POD_IP is set: the server then records the
    // address it sees this agent connect from (checked, never a guessed FQDN).
    node_.address = config_.local_addr;
    RETURN_IF_ERROR(SetupGrpcRendezvous());
  }
  ASSIGN_OR_RETURN(node_.store_port, OpenFreshStore());
  if (!config_.save_pid.empty()) {
    RETURN_IF_ERROR(WriteFileAtomically(config_.save_pid, absl::StrCat(getpid(), "\n")));
  }
  if (config_.health_port >= 0) {
    ASSIGN_OR_RETURN(health_,
                     rdzv::HealthServer::Start(absl::StrCat("[::]:", config_.health_port)));
  }
  return absl::OkStatus();
}

absl::Status Agent::SetupGrpcRendezvous() {
  const std::string& host = config_.rdzv_host_name;
  std::string endpoint = JoinHostPort(host, config_.rdzv_port);
  bool host_here = config_.rdzv_hosting == RdzvHosting::kAlways ||
                   (config_.rdzv_hosting == RdzvHosting::kAuto && IsThisHost(host, hostname_));
  if (host_here) {
    rdzv::RendezvousServer::Options options;
    options.listen_address = absl::StrCat("[::]:", config_.rdzv_port);
    options.token = config_.token;
    options.tls_cert_file = config_.tls_cert;
    options.tls_key_file = config_.tls_key;
    options.run_id = run_id_;
    options.heartbeat_interval = config_.heartbeat_interval;
    options.heartbeat_misses = config_.heartbeat_misses;
    absl::StatusOr<std::unique_ptr<rdzv::RendezvousServer>> server =
        rdzv::RendezvousServer::Start(options);
    if (server.ok()) {
      server_ = *std::move(server);
    } else if (config_.rdzv_hosting == RdzvHosting::kAlways) {
      return absl::FailedPreconditionError(
          absl::StrCat("--rdzv-host true: cannot serve the rendezvous on port ", config_.rdzv_port,
                       ": ", server.status().message()));
    } else {
      // Another agent on this host already serves it (the usual case when several agents
      // share a machine): join that one.
      spdlog::info("rendezvous at {} is served by another process; joining it", endpoint);
    }
  }
  rdzv::GrpcRendezvousClient::Options options;
  options.endpoint = endpoint;
  options.token = config_.token;
  options.tls_ca_file = config_.tls_ca;
  options.loop = loop_.get();
  options.join_timeout = config_.join_timeout;
  ASSIGN_OR_RETURN(rdzv_, rdzv::GrpcRendezvousClient::Create(options));
  return absl::OkStatus();
}

absl::Status Agent::PrepareRunDir() {
  if (config_.log_dir.empty()) {
    // Without --log-dir the directory holds only torch's per-rank error.json (plus stream
    // files when -r/-t ask for them). Creating and removing a directory per rank on every
    // attempt costs up to ms each on a disk file system, so when nothing large will be
    // written there it goes to tmpfs (/dev/shm) unless TMPDIR says otherwise.
    const char* tmp = getenv("TMPDIR");
    bool streams = !config_.redirects.by_rank.empty() || !config_.tee.by_rank.empty();
    std::string root = tmp && *tmp                                        ? tmp
                       : !streams && access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm"
                                                                          : "/tmp";
    std::string tmpl = absl::StrCat(root, "/muster_XXXXXX");
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

absl::StatusOr<int> Agent::OpenFreshStore() {
  store_.reset();  // the previous round's key space ends here
  if (config_.store != StoreOwner::kAgent) return 0;
  c10d::StoreServer::Options options;
  options.bind_address = StoreBindAddress(node_.address);
  ASSIGN_OR_RETURN(store_, c10d::StoreServer::Start(options));
  return static_cast<int>(store_->port());
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
    if (exit_code_) continue;
    if (agent_signal_ != 0) {
      spdlog::warn("received {} again while stopping: killing the workers now", SignalName(sig));
      group_->Escalate();
      continue;
    }
    agent_signal_ = sig;
    events_->Write("signal_received", {{"signal", SignalName(sig)}});
    spdlog::info("received {}: forwarding it to every worker, SIGKILL after {}", SignalName(sig),
                 HumanDuration(config_.shutdown_timeout));
    rdzv_->Leave(absl::StrCat("agent received ", SignalName(sig)));
    ExitAfterStop(128 + sig, absl::StrCat("stopped by ", SignalName(sig), "; exiting ", 128 + sig),
                  false, sig);
  }
}

void Agent::ReapChildren() {
  for (;;) {
    int wstatus = 0;
    pid_t pid = waitpid(-1, &wstatus, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) break;  // 0: children left but none exited; ECHILD: no children at all
    if (group_->OnChildExited(pid, wstatus)) continue;
    if (pid == watchdog_->pid()) {
      spdlog::warn("watchdog (pid {}) exited unexpectedly", pid);
    } else {
      spdlog::debug("reaped orphan pid {} ({})", pid,
                    ExitStatus::FromWaitStatus(wstatus).Describe());
    }
  }
  group_->OnReaped();
}

void Agent::OnWorkerExit(const WorkerExit& e) {
  Publish(group_->running() ? "Running" : "Stopping");
  if (!config_.debug) rdzv_->ReportWorkerEnded(round_, EndedWorkerOf(e));
  if (config_.debug && !e.while_stopping) {
    // The debug command is the Pod's main process: its end is the agent's end.
    ExitAfterStop(e.code, absl::StrCat("debug command ended: ", e.what, "; exiting ", e.code),
                  e.code != 0);
    return;
  }
  if (e.while_stopping || !group_->running()) {
    spdlog::debug("local rank {} (pid {}) stopped: {}", e.placement.local_rank, e.pid, e.what);
    return;
  }
  ExitVerdict verdict =
      e.exec_failed ? ExitVerdict::kFatal
                    : ClassifyExit(config_.restart_policy, config_.restartable_exit_codes, e.code);
  if (verdict == ExitVerdict::kSucceeded) {
    spdlog::debug("local rank {} (pid {}) exited 0", e.placement.local_rank, e.pid);
    if (group_->AllSucceeded()) {
      rdzv_->ReportSucceeded(round_);
      StopWorkers(StopCause::kSucceeded, SIGTERM);  // whatever the workers left behind
    }
    return;
  }
  std::string line =
      absl::StrCat("rank ", e.placement.rank, " (local_rank ", e.placement.local_rank, ", pid ",
                   e.pid, ", host ", hostname_, ") failed: ", e.what);
  if (e.error && !e.error->message.empty()) absl::StrAppend(&line, ": ", e.error->message);
  spdlog::error("{} ({} policy: {})", line, RestartPolicyName(config_.restart_policy),
                ExitVerdictName(verdict));
  if (e.error && !e.error->traceback.empty()) {
    spdlog::error("rank {} traceback:\n{}", e.placement.rank, e.error->traceback);
  }
  rdzv::Failure f;
  f.node_id = node_.node_id;
  f.host = hostname_;
  f.rank = e.placement.rank;
  f.local_rank = e.placement.local_rank;
  f.pid = e.pid;
  f.code = e.code;
  f.what = ToValidUtf8(e.what);
  f.message = ToValidUtf8(e.error ? e.error->message : "");
  f.restartable = verdict == ExitVerdict::kRestartable;
  rdzv_->ReportFailure(round_, f);
  StopWorkers(StopCause::kFailed, SIGTERM);  // at once: no need to wait for the job's word
}

void Agent::StopWorkers(StopCause cause, int sig) {
  if (!group_->stopping() || cause == StopCause::kExiting) stop_cause_ = cause;
  stop_pending_ = true;
  group_->Stop(sig);
  Publish("Stopping");
}

void Agent::OnWorkersStopped() {
  if (!stop_pending_) return;
  stop_pending_ = false;
  if (pending_exit_) return Finish(*pending_exit_);
  if (stop_cause_ == StopCause::kSucceeded && !job_asked_stop_) return;  // exit barrier
  ReportStopped();
}

void Agent::ReportStopped() {
  stop_cause_ = StopCause::kNone;
  absl::StatusOr<int> port = OpenFreshStore();
  if (!port.ok()) {
    ExitAfterStop(
        1, absl::StrCat("cannot open a store for the next round: ", port.status().message()), true);
    return;
  }
  rdzv_->ReportStopped(round_, *port);
}

void Agent::OnRendezvousEvent(const rdzv::Event& e) {
  if (exit_code_) return;
  switch (e.kind) {
    case rdzv::Event::Kind::kProgress:
      spdlog::info("rendezvous: {}", e.text);
      return;
    case rdzv::Event::Kind::kRoundStarted:
      return StartRound(e.assignment);
    case rdzv::Event::Kind::kStopWorkers:
      job_asked_stop_ = true;
      last_stop_ = e;
      if (group_->running()) {
        spdlog::info("stopping local workers: {}", e.text);
        StopWorkers(StopCause::kJobRequest, SIGTERM);
      } else if (!stop_pending_) {
        ReportStopped();  // already stopped: waiting at the exit barrier
      }
      return;
    case rdzv::Event::Kind::kFinished: {
      outcome_ = e.outcome;
      const rdzv::Outcome& o = e.outcome;
      if (o.exit_code != 0 && o.root_cause && !config_.worker_env_base.empty()) {
        auto it = config_.worker_env_base.find("TORCHELASTIC_ERROR_FILE");
        if (it != config_.worker_env_base.end() && !it->second.empty()) {
          WorkerError err{
              o.root_cause->message.empty() ? o.root_cause->what : o.root_cause->message, "",
              absl::ToUnixSeconds(absl::Now())};
          absl::Status st = WriteAgentErrorFile(it->second, err, o.exit_code);
          if (!st.ok()) spdlog::warn("cannot write TORCHELASTIC_ERROR_FILE: {}", st.message());
        }
      }
      if (o.exit_code == 0) {
        ExitAfterStop(0, absl::StrCat("job succeeded: ", o.reason), false);
      } else {
        ExitAfterStop(o.exit_code,
                      absl::StrCat("job failed: ", o.reason, "; exiting ", o.exit_code), true);
      }
      return;
    }
  }
}

void Agent::StartRound(const rdzv::Assignment& a) {
  if (a.restart_count > restart_count_) {
    spdlog::info("restarting all {} local workers: attempt {} ({} of {} restarts used)",
                 config_.nproc_per_node, a.restart_count, a.restart_count, config_.max_restarts);
    nlohmann::json fields = {{"attempt", a.restart_count},
                             {"round", a.round},
                             {"restarts_used", a.restart_count},
                             {"max_restarts", config_.max_restarts}};
    if (last_stop_) {
      fields["reason"] = last_stop_->text;
      if (last_stop_->failure) {
        fields["rank"] = last_stop_->failure->rank;
        fields["code"] = last_stop_->failure->code;
        fields["host"] = last_stop_->failure->host;
      }
    }
    events_->Write("restart_decided", fields);
  } else if (a.round > 1) {
    spdlog::info("round {}: re-formed with {} nodes, no restart used", a.round, a.group_world_size);
  }
  round_ = a.round;
  restart_count_ = a.restart_count;
  job_asked_stop_ = false;
  assignment_ = a;
  // Only group rank 0's store serves the round; the others close theirs.
  if (a.group_rank != 0) store_.reset();
  RoundInfo round;
  round.restart_count = a.restart_count;
  round.run_id = run_id_;
  round.master_addr = a.master_addr;
  round.master_port = a.master_port;
  round.use_agent_store = config_.store == StoreOwner::kAgent;
  if (!round.use_agent_store) {
    round.master_addr = config_.max_nodes == 1 ? config_.master_addr : a.master_addr;
    round.master_port = config_.master_port;
    if (config_.standalone && !config_.master_port_given) {
      absl::StatusOr<int> port = PickFreePort();
      if (!port.ok()) {
        ExitAfterStop(1, absl::StrCat("cannot pick a master port: ", port.status().message()),
                      true);
        return;
      }
      round.master_port = *port;
    }
  }
  if (!config_.hostfile.empty()) {
    absl::Status hs = WriteFileAtomically(config_.hostfile, HostfileText(a));
    if (!hs.ok()) spdlog::warn("cannot write --hostfile: {}", hs.message());
  }
  if (config_.debug) return StartDebugCommand(a, round);
  absl::Status st =
      group_->Start(a.group_rank, a.rank_base, a.world_size, a.group_world_size, round);
  if (!st.ok()) {
    ExitAfterStop(1, absl::StrCat("cannot start workers: ", st.message()), true, SIGKILL);
    return;
  }
  // The job's status shows the pids (DESIGN §4.6). A worker that could not be executed has
  // none; its exit follows through OnWorkerExit.
  std::vector<rdzv::StartedWorker> started;
  for (const WorkerGroup::WorkerView& w : group_->Workers()) {
    if (w.pid > 0) started.push_back({w.placement.local_rank, w.placement.rank, w.pid});
  }
  rdzv_->ReportWorkersStarted(round_, started);
  Publish("Running");
}

void Agent::StartDebugCommand(const rdzv::Assignment& a, RoundInfo round) {
  const int n = config_.nproc_per_node;
  for (int local = 0; local < n; ++local) {
    int rank = a.rank_base + local;
    WorkerPlacement p{local, rank,         a.group_rank, a.group_world_size,
                      n,     a.world_size, rank,         a.world_size};
    round.error_file =
        absl::StrCat(run_dir_, "/attempt_", a.restart_count, "/", local, "/error.json");
    std::vector<std::string> env = BuildWorkerEnv(config_.worker_env_base, config_, p, round);
    absl::Status st = WriteRankFiles(
        config_.debug_dir, rank, EnvFileText(config_.worker_env_base, env),
        config_.command.empty() ? std::vector<std::string>{} : BuildWorkerArgv(config_, local));
    if (!st.ok()) {
      ExitAfterStop(2, absl::StrCat("--debug-dir ", config_.debug_dir, ": ", st.message()), true);
      return;
    }
  }
  absl::Status hs =
      WriteFileAtomically(absl::StrCat(config_.debug_dir, "/hostfile"), HostfileText(a));
  if (!hs.ok()) spdlog::warn("cannot write the debug hostfile: {}", hs.message());
  std::string command = config_.debug_command;
  if (command.empty()) {
    // sshd refuses to start without its privilege-separation directory, which only an init
    // system creates; -e sends its log to stderr (a pod has no syslog).
    command = access("/usr/sbin/sshd", X_OK) == 0
                  ? "mkdir -p -m 755 /run/sshd && exec /usr/sbin/sshd -D -e"
                  : "sleep infinity";
  }
  spdlog::info(
      "debug mode: ranks {}..{} prepared in {} (source rank-N.env, or `muster exec --rank N "
      "--debug-dir {} [-- CMD]`); running: {}",
      a.rank_base, a.rank_base + n - 1, config_.debug_dir, config_.debug_dir, command);
  absl::Status st = group_->StartCommand({"/bin/sh", "-c", command});
  if (!st.ok()) {
    ExitAfterStop(1, absl::StrCat("cannot start the debug command: ", st.message()), true);
    return;
  }
  Publish("Running");
}

void Agent::OnRendezvousError(const absl::Status& error) {
  int code = ExitCodeForRendezvousError(error);
  ExitAfterStop(code, absl::StrCat("rendezvous failed: ", error.message(), "; exiting ", code),
                true);
}

void Agent::ExitAfterStop(int code, std::string summary, bool error, int sig) {
  if (!pending_exit_) {  // the first reason to exit is the one that counts
    pending_exit_ = code;
    summary_ = std::move(summary);
    summary_is_error_ = error;
  }
  if (group_->running() || group_->stopping()) {
    StopWorkers(StopCause::kExiting, sig);  // while stopping: forwards a new signal
  } else {
    Finish(*pending_exit_);
  }
}

void Agent::Publish(const std::string& phase) {
  if (health_) health_->SetServing(phase == "Running");
  // The document lists every worker and is published on every worker's exit: O(K^2) for K
  // workers, which slowed spawning at K=256 (B7) with nobody reading it.
  if (!status_file_->enabled()) return;
  nlohmann::json doc = {{"phase", phase},
                        {"run_id", run_id_},
                        {"node_id", node_.node_id},
                        {"host", hostname_},
                        {"round", round_},
                        {"restart_count", restart_count_},
                        {"max_restarts", config_.max_restarts},
                        {"time", absl::FormatTime(absl::Now())},
                        {"workers", nlohmann::json::array()}};
  if (assignment_) {
    doc["group_rank"] = assignment_->group_rank;
    doc["group_world_size"] = assignment_->group_world_size;
    doc["world_size"] = assignment_->world_size;
    doc["master"] = absl::StrCat(assignment_->master_addr, ":", assignment_->master_port);
  }
  for (const WorkerGroup::WorkerView& w : group_->Workers()) {
    nlohmann::json worker = {{"rank", w.placement.rank},
                             {"local_rank", w.placement.local_rank},
                             {"pid", w.pid},
                             {"state", w.status ? "exited" : "running"}};
    if (w.status) worker["code"] = w.status->code();
    doc["workers"].push_back(worker);
  }
  if (!config_.probe_summary.is_null()) doc["probe"] = config_.probe_summary;
  if (outcome_) {
    doc["exit_code"] = outcome_->exit_code;
    doc["reason"] = outcome_->reason;
    if (outcome_->root_cause) {
      const rdzv::Failure& f = *outcome_->root_cause;
      doc["root_cause"] = FailureJson(f);
    }
  }
  status_file_->Write(doc);
}

void Agent::Finish(int code) {
  if (exit_code_) return;
  exit_code_ = code;
  Publish(code == 0 ? "Succeeded" : "Failed");
  nlohmann::json fields = {{"exit_code", code}, {"attempt", restart_count_}, {"round", round_}};
  if (outcome_ && outcome_->root_cause) {
    const rdzv::Failure& f = *outcome_->root_cause;
    fields["root_cause"] = FailureJson(f);
  }
  events_->Write("job_finished", fields);
}

int Agent::Run() {
  absl::Status st = Setup();
  if (!st.ok()) {
    spdlog::error("agent setup failed: {}", st.message());
    return 1;
  }
  rdzv::JobSpec spec;
  spec.run_id = run_id_;
  spec.min_nodes = config_.min_nodes;
  spec.max_nodes = config_.max_nodes;
  spec.max_restarts = config_.max_restarts;
  spec.restart_after_success = RestartsAfterSuccess(config_.restart_policy);
  spec.join_timeout = config_.join_timeout;
  spec.last_call_timeout = config_.last_call_timeout;
  spec.heartbeat_interval = config_.heartbeat_interval;
  spec.heartbeat_misses = config_.heartbeat_misses;
  // Agents stop their workers within --shutdown-timeout plus the SIGKILL grace.
  spec.stop_timeout = config_.shutdown_timeout + absl::Seconds(30);
  Publish("Rendezvous");
  rdzv_->Start(
      node_, spec, [this](const rdzv::Event& e) { OnRendezvousEvent(e); },
      [this](const absl::Status& s) { OnRendezvousError(s); });
  while (!exit_code_) {
    st = loop_->RunOnce();
    if (!st.ok()) {
      spdlog::error("event loop failed: {}; killing the workers", st.message());
      group_->Stop(SIGKILL);
      Finish(1);
    }
  }
  // Teardown. The helpers are told first and waited for last, so that they wind down while
  // the agent does its own work: each hand-off to another task is a wake-up, which on a busy
  // machine can cost a scheduler time slice (B8). Every worker is reaped by now.
  if (store_) store_->BeginShutdown();
  watchdog_->Disarm();
  console_->Close();
  rdzv_.reset();  // our own stream ends here
  if (server_) {
    // Other agents learn the outcome through this process: give them time to hear it
    // and hang up before the server goes away.
    if (!server_->WaitForAgentsToLeave(node_.node_id, absl::Seconds(10))) {
      spdlog::warn("some agents were still connected 10 s after the job ended");
    }
    server_.reset();
  }
  if (remove_log_root_ && !RemoveTree(log_root_)) {
    spdlog::debug("could not remove all of {}", log_root_);
  }
  if (!config_.termination_log.empty() && !summary_.empty()) {
    // Kubernetes shows this file in `kubectl describe pod`. Written in place (it is often
    // a bind mount, which rename cannot replace).
    FILE* f = std::fopen(config_.termination_log.c_str(), "w");
    if (f == nullptr || std::fprintf(f, "%s\n", summary_.c_str()) < 0 || std::fclose(f) != 0) {
      spdlog::warn("cannot write --termination-log {}: {}", config_.termination_log,
                   strerror(errno));
    }
  }
  store_.reset();    // its thread has had the time above to end
  console_.reset();  // the workers' last output: the summary must be the last line
  // Reaped when it is gone already. Not waited for: the disarmed watchdog exits as soon as it
  // runs, and its exit (a forked copy of this process's mappings) costs ~0.5 ms that the
  // agent's exit need not include (B8); whoever inherits it (init, a subreaper) reaps it.
  watchdog_->ReapIfGone();
  if (summary_is_error_) {
    spdlog::error("{}", summary_);
  } else if (!summary_.empty()) {
    spdlog::info("{}", summary_);
  }
  return *exit_code_;
}

}  // namespace muster
