#include "agent/flags.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/conventions.h"
#include "agent/flag_table.h"
#include "agent/gpu_probe.h"
#include "agent/wire_values.h"
#include "base/duration.h"
#include "base/status_macros.h"
#include "launch/cpu_topology.h"
#include "launch/signals.h"

namespace muster {
namespace {

// python, python3, python3.11, /usr/bin/python3: the interpreter a Pod's command starts with.
bool IsPythonInterpreter(const std::string& arg) {
  absl::string_view rest = arg;
  if (size_t slash = rest.rfind('/'); slash != absl::string_view::npos) {
    rest.remove_prefix(slash + 1);
  }
  if (!absl::ConsumePrefix(&rest, "python")) return false;
  for (char ch : rest) {
    if (!absl::ascii_isdigit(ch) && ch != '.') return false;
  }
  return true;
}

// True when `command` is a Pod's old command (`python train.py`) rather than a script: an
// interpreter name with no script of that name in the current directory, or an interpreter
// path that is executable.
bool StartsWithInterpreter(const std::vector<std::string>& command) {
  if (command.empty() || !IsPythonInterpreter(command[0])) return false;
  const std::string& first = command[0];
  if (first.find('/') != std::string::npos) return access(first.c_str(), X_OK) == 0;
  struct stat st;
  return stat(first.c_str(), &st) != 0 || !S_ISREG(st.st_mode);
}

// One flag of `muster run`. `name` is the dash spelling without "--"; the
// underscore spelling, MUSTER_<NAME> and PET_<NAME> are derived from it.

constexpr FlagSpec kFlags[] = {
    {"nnodes", 0, true, "Job", "1", "number of nodes, N or MIN:MAX"},
    {"rdzv-endpoint", 0, true, "Rendezvous", "none",
     "HOST[:PORT] of the rendezvous server (port 29400); needed when --nnodes > 1"},
    {"rdzv-conf", 0, true, "Rendezvous", "",
     "join_timeout=600s,last_call_timeout=30s,heartbeat_interval=5s,heartbeat_misses=3"},
    {"rdzv-host", 0, true, "Rendezvous", "auto",
     "serve the rendezvous here: auto (when the endpoint is this node), true, false"},
    {"node-rank", 0, true, "Rendezvous", "by arrival", "this node's group rank (a hint)"},
    {"local-addr", 0, true, "Rendezvous", "POD_IP, else route to endpoint",
     "address other nodes reach this one at (MASTER_ADDR when it is group rank 0)"},
    {"token-file", 0, true, "Rendezvous", "MUSTER_TOKEN", "file with the job's shared secret"},
    {"tls-cert", 0, true, "Rendezvous", "none", "PEM certificate for the rendezvous server"},
    {"tls-key", 0, true, "Rendezvous", "none", "PEM key for --tls-cert"},
    {"tls-ca", 0, true, "Rendezvous", "none", "PEM CA that signed the server's certificate"},
    {"nproc-per-node", 0, true, "Job", "1", "workers on this node: N, cpu, gpu or auto"},
    {"standalone", 0, false, "Job", "off", "single node, private store port and a fresh run id"},
    {"rdzv-id", 0, true, "Job", "none", "run id shared by the job (alias --run-id)"},
    {"run-id", 0, true, "Job", "none", "alias of --rdzv-id"},
    {"role", 0, true, "Job", "default", "worker role name (ROLE_NAME)"},
    {"store", 0, true, "Job", "agent",
     "c10d store: agent (served here, fresh port per attempt) or rank0 (worker rank 0, static)"},
    {"master-addr", 0, true, "Job", "127.0.0.1", "MASTER_ADDR given to workers"},
    {"master-port", 0, true, "Job", "29500",
     "with --store rank0: the port worker rank 0 binds (--standalone: a free port)"},
    {"rdzv-backend", 0, true, "Job", "static",
     "accepted for torchrun compatibility; muster has its own"},
    {"module", 'm', false, "Command", "off", "run the command as a Python module (python -m)"},
    {"no-python", 0, false, "Command", "off", "exec the command directly, not through Python"},
    {"local-rank-arg", 0, false, "DeepSpeed", "off",
     "append --local_rank=N to each worker's arguments (DeepSpeedJob localRank)"},
    {"bind-cores-to-rank", 0, false, "DeepSpeed", "off",
     "give each local rank its own contiguous share of the CPUs (NUMA-aware)"},
    {"bind-core-list", 0, true, "DeepSpeed", "all allowed", "CPUs to share out, e.g. 0-15,32-47"},
    {"enable-each-rank-log", 0, true, "DeepSpeed", "none",
     "per-rank log files under this directory (same as --log-dir)"},
    {"save-pid", 0, true, "DeepSpeed", "none", "write the agent's pid to this file"},
    {"hostfile", 0, true, "DeepSpeed", "none",
     "write a DeepSpeed-style hostfile (address slots=N) for each round"},
    {"max-restarts", 0, true, "Failures", "0", "job-wide restart budget"},
    {"restart-policy", 0, true, "Failures", "ExitCode", "Never, OnFailure, Always or ExitCode"},
    {"restartable-exit-codes", 0, true, "Failures", "130,137,138,143",
     "codes that restart the job under ExitCode"},
    {"shutdown-timeout", 0, true, "Failures", "30s", "grace period between SIGTERM and SIGKILL"},
    {"signals-to-handle", 0, true, "Failures", "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
     "signals forwarded to workers before the agent exits 128+N"},
    {"monitor-interval", 0, true, "Failures", "-",
     "accepted for torchrun compatibility; muster is event driven and never "
     "polls"},
    {"log-dir", 0, true, "Output", "temporary",
     "per-rank logs: attempt_N/<local_rank>/std{out,err}.log"},
    {"redirects", 'r', true, "Output", "0", "streams to files only: 0-3 or 0:1,1:2 per local rank"},
    {"tee", 't', true, "Output", "0", "streams to files and console: 0-3 or 0:1,1:2"},
    {"local-ranks-filter", 0, true, "Output", "all", "local ranks shown on the console, e.g. 0,3"},
    {"log-line-prefix-template", 0, true, "Output", "[${role_name}${local_rank}]:",
     "console prefix; ${role_name} ${local_rank} ${rank} ${hostname}"},
    {"log-level", 0, true, "Output", "info", "agent log level (also LOGLEVEL)"},
    {"event-log", 0, true, "Output", "none", "append the agent's transitions as JSON lines"},
    {"status-file", 0, true, "Health", "none",
     "this node's status as JSON, replaced atomically on every transition"},
    {"termination-log", 0, true, "Health", "/dev/termination-log if present",
     "one line with the root cause (or success) written at exit"},
    {"health-port", 0, true, "Health", "none",
     "grpc.health.v1 here: NOT_SERVING until the workers run"},
    {"probe", 0, true, "GPU", "auto",
     "off | auto (inventory when a driver may be present) | inventory | nccl"},
    {"stale-gpu-policy", 0, true, "GPU", "fail",
     "GPUs held by other processes at start: fail (naming the pids), wait or kill"},
    {"probe-timeout", 0, true, "GPU", "30s", "deadline for muster-probe"},
    {"debug", 0, false, "Debug", "off",
     "rendezvous, write per-rank env files, run --debug-command instead of the workers"},
    {"debug-command", 0, true, "Debug",
     "/usr/sbin/sshd -D -e (after mkdir /run/sshd), else sleep infinity",
     "what debug mode runs (a shell command line)"},
    {"debug-dir", 0, true, "Debug", "/run/muster",
     "where debug mode writes rank-N.env and hostfile"},
    {"dry-run", 0, false, "Other", "off", "print the resolved configuration and exit"},
};

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

absl::StatusOr<int> ParseNonNegative(absl::string_view where, absl::string_view text) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0) {
    return Invalid(where, absl::StrCat("'", text, "' is not a non-negative integer"));
  }
  return value;
}

// torchrun's Std.from_str: one mask for every rank, or LOCAL_RANK:MASK pairs. Each pair is
// exactly two numbers: "0:1:2" is an error, not 0:1.
absl::StatusOr<StreamSelection> ParseStreams(absl::string_view where, absl::string_view text) {
  StreamSelection sel;
  auto mask = [&](absl::string_view v) -> absl::StatusOr<int> {
    int m = 0;
    if (!absl::SimpleAtoi(v, &m) || m < 0 || m > 3) {
      return Invalid(
          where, absl::StrCat("'", v, "' must be 0 (none), 1 (stdout), 2 (stderr) or 3 (both)"));
    }
    return m;
  };
  absl::string_view t = text;
  if (t.find(':') == absl::string_view::npos) {
    ASSIGN_OR_RETURN(int m, mask(t));
    sel.by_rank[StreamSelection::kAllRanks] = m;
    return sel;
  }
  for (absl::string_view part : absl::StrSplit(t, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(part, ':');
    int rank = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[0], &rank) || rank < 0) {
      return Invalid(where, absl::StrCat("'", part, "' must be LOCAL_RANK:STREAMS, e.g. 0:1,1:2"));
    }
    ASSIGN_OR_RETURN(int m, mask(kv[1]));
    if (!sel.by_rank.emplace(rank, m).second) {
      return Invalid(where, absl::StrCat("local rank ", rank, " is given twice in '", t, "'"));
    }
  }
  return sel;
}

// torch's RendezvousParameters.get_as_bool, for --rdzv-conf keys.
std::optional<bool> ParseTorchBool(absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(text);
  if (lower == "1" || lower == "true" || lower == "t" || lower == "yes" || lower == "y") {
    return true;
  }
  if (lower == "0" || lower == "false" || lower == "f" || lower == "no" || lower == "n") {
    return false;
  }
  return std::nullopt;
}

// What --log-level and LOGLEVEL accept: spdlog's level names and Python logging's (torchrun
// passes LOGLEVEL to logging), lower-cased. Returns spdlog's name.
std::optional<std::string> ParseLogLevel(absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lower == "notset") return "trace";
  if (lower == "warn") return "warning";
  if (lower == "err") return "error";
  if (lower == "fatal") return "critical";
  for (const char* level : {"trace", "debug", "info", "warning", "error", "critical", "off"}) {
    if (lower == level) return lower;
  }
  return std::nullopt;
}

absl::StatusOr<std::string> LogLevel(absl::string_view where, absl::string_view text) {
  std::optional<std::string> level = ParseLogLevel(text);
  if (!level) {
    return Invalid(where,
                   absl::StrCat("'", EscapeForMessage(std::string_view(text.data(), text.size())),
                                "' is not a log level; use debug, info, warning, error, "
                                "critical, trace or off"));
  }
  return *level;
}

int CountAffinityCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int CountNvidiaDevices() {
  int count = 0;
  DIR* dir = opendir("/dev");
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) {
    std::string_view n = e->d_name;
    if (n.size() > 6 && n.substr(0, 6) == "nvidia" &&
        n.find_first_not_of("0123456789", 6) == std::string_view::npos) {
      ++count;
    }
  }
  closedir(dir);
  return count;
}

// Environment variables operators set at node level (DESIGN §4.8). They are not
// passed to workers as worker ranks, but a malformed one is a configuration
// error worth stopping on.
constexpr const char* kNumericNodeVars[] = {
    "WORLD_SIZE",           "RANK",          "NODE_RANK",    "MASTER_PORT", "PET_MASTER_PORT",
    "JOB_COMPLETION_INDEX", "VC_TASK_INDEX", "VK_TASK_INDEX"};

}  // namespace

absl::Status ParseRendezvousFlags(const FlagLookup& lookup,
                                  const std::map<std::string, std::string>& env, Config* c) {
  if (auto v = lookup("rdzv-endpoint")) {
    c->sources["rdzv-endpoint"] = v->second;
    std::string text = v->first;
    std::string host = text, port_text;
    if (!text.empty() && text[0] == '[') {  // [v6]:port
      size_t close = text.find(']');
      if (close == std::string::npos) {
        return Invalid(v->second, absl::StrCat("'", text, "': missing ']' after the IPv6 address"));
      }
      host = text.substr(1, close - 1);
      if (close + 1 < text.size()) {
        if (text[close + 1] != ':')
          return Invalid(v->second, absl::StrCat("'", text, "': expected :PORT after ']'"));
        port_text = text.substr(close + 2);
      }
    } else if (size_t colon = text.rfind(':');
               colon != std::string::npos && text.find(':') == colon) {
      host = text.substr(0, colon);
      port_text = text.substr(colon + 1);
    } else if (colon != std::string::npos) {
      // Several colons without brackets: only an IPv6 address ("host:1:2" is no endpoint).
      in6_addr v6;
      if (inet_pton(AF_INET6, text.substr(0, text.find('%')).c_str(), &v6) != 1) {
        return Invalid(v->second, absl::StrCat("'", EscapeForMessage(text),
                                               "' is not HOST[:PORT]; write an IPv6 address "
                                               "with a port as [ADDR]:PORT"));
      }
    }
    if (host.empty()) {
      return Invalid(v->second, absl::StrCat("'", text, "' has no host; write HOST[:PORT]"));
    }
    RETURN_IF_ERROR(CheckHostOrAddress(v->second, host));
    if (!port_text.empty() || (text.size() && text.back() == ':')) {
      int port = 0;
      if (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
        return Invalid(v->second, absl::StrCat("'", text, "': '", port_text,
                                               "' is not a port (1..65535); write HOST[:PORT]"));
      }
      c->rdzv_port = port;
    }
    c->rdzv_host_name = host;
  }
  if (auto v = lookup("rdzv-conf")) {
    c->sources["rdzv-conf"] = v->second;
    // As torch's _parse_rendezvous_config: KEY=VALUE items separated by ',', blanks around
    // keys and values ignored, an empty key or value an error.
    absl::string_view conf = absl::StripAsciiWhitespace(v->first);
    std::vector<absl::string_view> items;
    if (!conf.empty()) items = absl::StrSplit(conf, ',');
    for (absl::string_view item : items) {
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(item, absl::MaxSplits('=', 1));
      std::string key(absl::StripAsciiWhitespace(kv.first));
      std::string value(absl::StripAsciiWhitespace(kv.second));
      if (key.empty()) {
        return Invalid(v->second, absl::StrCat("'", EscapeForMessage(v->first),
                                               "' must be KEY=VALUE,...: an item has no key"));
      }
      if (value.empty()) {
        return Invalid(v->second, absl::StrCat(key, " has no value; write ", key, "=VALUE"));
      }
      auto duration = [&](absl::Duration* out) -> absl::Status {
        absl::StatusOr<absl::Duration> d = ParseDuration(value);
        if (!d.ok()) return Invalid(v->second, absl::StrCat(key, ": ", d.status().message()));
        *out = *d;
        return absl::OkStatus();
      };
      if (key == "join_timeout" || key == "timeout") {
        RETURN_IF_ERROR(duration(&c->join_timeout));
      } else if (key == "last_call_timeout") {
        RETURN_IF_ERROR(duration(&c->last_call_timeout));
      } else if (key == "heartbeat_interval") {
        RETURN_IF_ERROR(duration(&c->heartbeat_interval));
        if (c->heartbeat_interval <= absl::ZeroDuration()) {
          return Invalid(v->second, "heartbeat_interval must be positive");
        }
      } else if (key == "heartbeat_misses") {
        if (!absl::SimpleAtoi(value, &c->heartbeat_misses) || c->heartbeat_misses < 1) {
          return Invalid(v->second, absl::StrCat("heartbeat_misses: '", value,
                                                 "' must be a positive integer"));
        }
      } else if (key == "is_host") {
        std::optional<bool> is_host = ParseTorchBool(value);
        if (!is_host) {
          return Invalid(v->second, absl::StrCat("is_host: '", EscapeForMessage(value),
                                                 "' is not a boolean; use true or false "
                                                 "(also 1/0, yes/no, t/f, y/n, as torch)"));
        }
        c->rdzv_hosting = *is_host ? "true" : "false";
      } else if (key == "read_timeout" || key == "close_timeout" || key == "exit_barrier_timeout") {
        // torch's keys without a meaning here: accepted so torchrun command lines work, but
        // checked as torch would (a number of seconds).
        absl::Duration unused;
        RETURN_IF_ERROR(duration(&unused));
      } else {
        return Invalid(v->second, absl::StrCat("unknown key '", EscapeForMessage(key),
                                               "'; known: join_timeout, last_call_timeout, "
                                               "heartbeat_interval, heartbeat_misses, is_host"));
      }
    }
  }
  if (auto v = lookup("rdzv-host")) {
    c->sources["rdzv-host"] = v->second;
    if (v->first != "auto" && v->first != "true" && v->first != "false") {
      return Invalid(v->second, absl::StrCat("'", v->first, "' must be auto, true or false"));
    }
    c->rdzv_hosting = v->first;
  }
  if (auto v = lookup("node-rank")) {
    c->sources["node-rank"] = v->second;
    ASSIGN_OR_RETURN(c->node_rank, ParseNonNegative(v->second, v->first));
    if (c->node_rank >= c->max_nodes) {
      return Invalid(v->second, absl::StrCat(c->node_rank, " is outside 0..", c->max_nodes - 1,
                                             " (--nnodes allows ", c->max_nodes, " nodes)"));
    }
  }
  if (auto v = lookup("local-addr")) {
    c->sources["local-addr"] = v->second;
    RETURN_IF_ERROR(CheckHostOrAddress(v->second, v->first));
    c->local_addr = v->first;
  } else if (auto e = env.find("POD_IP"); e != env.end() && !e->second.empty()) {
    c->sources["local-addr"] = "POD_IP";
    RETURN_IF_ERROR(CheckHostOrAddress("POD_IP", e->second));
    c->local_addr = e->second;
  }
  {
    auto token_file = lookup("token-file");
    ASSIGN_OR_RETURN(c->token, ResolveToken(token_file, env));
    if (token_file) {
      c->sources["token"] = token_file->second;
    } else if (!c->token.empty()) {
      c->sources["token"] = "MUSTER_TOKEN";
    }
  }
  for (auto [name, field] : {std::pair<const char*, std::string*>{"tls-cert", &c->tls_cert},
                             {"tls-key", &c->tls_key},
                             {"tls-ca", &c->tls_ca}}) {
    if (auto v = lookup(name)) {
      c->sources[name] = v->second;
      if (access(v->first.c_str(), R_OK) != 0) {
        return Invalid(v->second, absl::StrCat("cannot read '", v->first, "': ", strerror(errno)));
      }
      *field = v->first;
    }
  }
  RETURN_IF_ERROR(ApplyOperatorConventions(env, c));
  if (c->tls_cert.empty() != c->tls_key.empty()) {
    return Invalid("--tls-cert/--tls-key", "give both or neither");
  }
  if (c->max_nodes > 1 && c->rdzv_host_name.empty()) {
    return Invalid(c->sources.count("nnodes") ? c->sources["nnodes"] : "--nnodes",
                   absl::StrCat("a job of up to ", c->max_nodes,
                                " nodes needs --rdzv-endpoint HOST[:PORT]: the node that hosts "
                                "the rendezvous, or a `muster serve`"));
  }
  return absl::OkStatus();
}

int StreamSelection::For(int local_rank) const {
  auto it = by_rank.find(local_rank);
  if (it != by_rank.end()) return it->second;
  it = by_rank.find(kAllRanks);
  return it == by_rank.end() ? 0 : it->second;
}

HostInfo HostInfo::Detect(const std::map<std::string, std::string>& env) {
  HostInfo h;
  h.cpus = CountAffinityCpus();
  auto it = env.find("CUDA_VISIBLE_DEVICES");
  if (it != env.end()) {
    for (absl::string_view d : absl::StrSplit(it->second, ',', absl::SkipWhitespace())) {
      if (d == "-1" || d == "NoDevFiles") break;  // CUDA stops at the first invalid entry
      ++h.gpus;
    }
  } else {
    h.gpus = CountNvidiaDevices();
  }
  return h;
}

bool RunHelpRequested(const std::vector<std::string>& args) { return HelpRequested(args, kFlags); }

std::string RunHelp() {
  std::string out =
      "Usage: muster run [flags] [--] SCRIPT_OR_CMD [ARGS...]\n\n"
      "Starts this node's workers with the environment torch's env:// expects, "
      "supervises\n"
      "them, restarts the group on restartable failures and exits with the "
      "root cause.\n"
      "Every flag may be spelled with dashes or underscores and set as "
      "MUSTER_<FLAG> or\n"
      "PET_<FLAG> (precedence: flag > MUSTER_* > PET_* > default).\n";
  out += FlagHelp(kFlags);
  absl::StrAppend(&out,
                  "\nEnvironment: PYTHON_EXEC (interpreter, default python3), LOGLEVEL.\n"
                  "Exit codes: 0 success; the root-cause worker's code (e.g. 1, 137); 2 "
                  "bad "
                  "flags or environment;\n126/127 command not executable / not found; "
                  "128+N "
                  "agent stopped by signal N.\n");
  return out;
}

absl::StatusOr<Config> ParseRunFlags(const std::vector<std::string>& args,
                                     const std::map<std::string, std::string>& env,
                                     const HostInfo& host) {
  ASSIGN_OR_RETURN(SplitArgs split, SplitFlags(args, kFlags, "muster run"));
  FlagValues values(std::move(split), env);
  Config c;
  c.command = values.rest();
  auto lookup = [&](const char* name) { return values.Get(name); };
  FlagLookup lookup_fn = [&](const char* name) { return lookup(name); };
  auto boolean = [&](const char* name, bool* out) -> absl::Status {
    auto v = lookup(name);
    if (!v) return absl::OkStatus();
    std::string lower = absl::AsciiStrToLower(v->first);
    if (lower == "1" || lower == "true" || lower == "yes") {
      *out = true;
    } else if (lower == "0" || lower == "false" || lower == "no" || lower.empty()) {
      *out = false;
    } else {
      return Invalid(v->second, absl::StrCat("'", v->first, "' is not a boolean; use 1 or 0"));
    }
    c.sources[name] = v->second;
    return absl::OkStatus();
  };
  // Runs `apply(value, where)` when the flag was set anywhere.
  auto with = [&](const char* name,
                  const std::function<absl::Status(const std::string&, const std::string&)>& apply)
      -> absl::Status {
    auto v = lookup(name);
    if (!v) return absl::OkStatus();
    c.sources[name] = v->second;
    return apply(v->first, v->second);
  };

  RETURN_IF_ERROR(boolean("standalone", &c.standalone));
  RETURN_IF_ERROR(boolean("module", &c.module));
  RETURN_IF_ERROR(boolean("no-python", &c.no_python));
  RETURN_IF_ERROR(boolean("dry-run", &c.dry_run));
  RETURN_IF_ERROR(boolean("local-rank-arg", &c.local_rank_arg));
  RETURN_IF_ERROR(boolean("debug", &c.debug));
  RETURN_IF_ERROR(with("probe", [&](const std::string& v, const std::string& w) -> absl::Status {
    if (v != "off" && v != "auto" && v != "inventory" && v != "nccl") {
      return Invalid(w, absl::StrCat("'", v, "' must be off, auto, inventory or nccl"));
    }
    c.probe = v;
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(
      with("stale-gpu-policy", [&](const std::string& v, const std::string& w) -> absl::Status {
        if (v != "fail" && v != "wait" && v != "kill") {
          return Invalid(w, absl::StrCat("'", v, "' must be fail, wait or kill"));
        }
        c.stale_gpu_policy = v;
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(
      with("probe-timeout", [&](const std::string& v, const std::string& w) -> absl::Status {
        absl::StatusOr<absl::Duration> d = ParseDuration(v);
        if (!d.ok() || *d <= absl::ZeroDuration()) return Invalid(w, "must be a positive duration");
        c.probe_timeout = *d;
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(with("debug-command", [&](const std::string& v, const std::string&) {
    c.debug_command = v;
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(
      with("debug-dir", [&](const std::string& v, const std::string& w) -> absl::Status {
        if (v.empty()) return Invalid(w, "must not be empty");
        c.debug_dir = v;
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(boolean("bind-cores-to-rank", &c.bind_cores_to_rank));
  RETURN_IF_ERROR(
      with("bind-core-list", [&](const std::string& v, const std::string& w) -> absl::Status {
        absl::StatusOr<std::vector<int>> cpus = ParseCpuList(v);
        if (!cpus.ok()) return Invalid(w, cpus.status().message());
        c.bind_core_list = *cpus;
        c.bind_cores_to_rank = true;
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(with("enable-each-rank-log", [&](const std::string& v, const std::string&) {
    c.log_dir = v;
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(with("save-pid", [&](const std::string& v, const std::string&) {
    c.save_pid = v;
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(with("hostfile", [&](const std::string& v, const std::string&) {
    c.hostfile = v;
    return absl::OkStatus();
  }));

  RETURN_IF_ERROR(with("nnodes", [&](const std::string& v, const std::string& w) -> absl::Status {
    std::vector<std::string> parts = absl::StrSplit(v, ':');
    int lo = 0, hi = 0;
    bool ok = parts.size() <= 2 && absl::SimpleAtoi(parts[0], &lo) &&
              absl::SimpleAtoi(parts.back(), &hi) && lo >= 1 && hi >= 1;
    if (!ok) return Invalid(w, absl::StrCat("'", v, "' must be N or MIN:MAX with N >= 1"));
    if (lo > hi)
      return Invalid(w, absl::StrCat("'", v, "': MIN ", lo, " is greater than MAX ", hi));
    c.min_nodes = lo;
    c.max_nodes = hi;
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(ParseRendezvousFlags(lookup_fn, env, &c));

  RETURN_IF_ERROR(
      with("nproc-per-node", [&](const std::string& v, const std::string& w) -> absl::Status {
        c.nproc_spec = v;
        return absl::OkStatus();
      }));
  {
    const std::string& v = c.nproc_spec;
    std::string where =
        c.sources.count("nproc-per-node") ? c.sources["nproc-per-node"] : "--nproc-per-node";
    int n = 0;
    if (v == "cpu") {
      n = host.cpus;
    } else if (v == "gpu") {
      n = host.gpus;  // 0: the GPU probe decides at start, or the check below refuses
    } else if (v == "auto") {
      n = host.gpus > 0 ? host.gpus : host.cpus;
    } else if (!absl::SimpleAtoi(v, &n) || n < 1) {
      return Invalid(where, absl::StrCat("'", v, "' must be a positive number, cpu, gpu or auto"));
    }
    c.nproc_per_node = n;
  }

  RETURN_IF_ERROR(with("role", [&](const std::string& v, const std::string& w) -> absl::Status {
    if (v.empty()) return Invalid(w, "must not be empty");
    c.role = v;
    return absl::OkStatus();
  }));
  // The run id travels in the rendezvous protocol (proto3 strings: UTF-8 only) and names a
  // directory: checked here, naming the flag, rather than refused by the server as an
  // unparsable Join.
  for (const char* name : {"run-id", "rdzv-id"}) {
    RETURN_IF_ERROR(with(name, [&](const std::string& v, const std::string& w) -> absl::Status {
      RETURN_IF_ERROR(CheckRunId(w, v));
      c.run_id = v;
      return absl::OkStatus();
    }));
  }
  RETURN_IF_ERROR(with("store", [&](const std::string& v, const std::string& w) -> absl::Status {
    if (v != "agent" && v != "rank0") {
      return Invalid(w, absl::StrCat("'", v, "' must be agent or rank0"));
    }
    c.store = v;
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(
      with("master-addr", [&](const std::string& v, const std::string& w) -> absl::Status {
        RETURN_IF_ERROR(CheckHostOrAddress(w, v));
        c.master_addr = v;
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(
      with("master-port", [&](const std::string& v, const std::string& w) -> absl::Status {
        ASSIGN_OR_RETURN(int port, ParseNonNegative(w, v));
        if (port < 1 || port > 65535)
          return Invalid(w, absl::StrCat("'", v, "' is not a port (1..65535)"));
        c.master_port = port;
        c.master_port_given = true;
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(
      with("rdzv-backend", [&](const std::string& v, const std::string& w) -> absl::Status {
        if (v != "static" && v != "c10d" && v != "etcd" && v != "etcd-v2") {
          return Invalid(
              w, absl::StrCat("'", v, "' is not a torchrun backend (static, c10d, etcd, etcd-v2)"));
        }
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(
      with("max-restarts", [&](const std::string& v, const std::string& w) -> absl::Status {
        ASSIGN_OR_RETURN(c.max_restarts, ParseNonNegative(w, v));
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(
      with("restart-policy", [&](const std::string& v, const std::string& w) -> absl::Status {
        absl::StatusOr<RestartPolicy> p = ParseRestartPolicy(v);
        if (!p.ok())
          return Invalid(w, absl::StrCat("'", v,
                                         "' is not a policy; use Never, "
                                         "OnFailure, Always or ExitCode"));
        c.restart_policy = *p;
        return absl::OkStatus();
      }));
  c.restartable_exit_codes = DefaultRestartableExitCodes();
  RETURN_IF_ERROR(with("restartable-exit-codes",
                       [&](const std::string& v, const std::string& w) -> absl::Status {
                         absl::StatusOr<std::set<int>> codes = ParseExitCodeList(v);
                         if (!codes.ok()) return Invalid(w, codes.status().message());
                         c.restartable_exit_codes = *codes;
                         return absl::OkStatus();
                       }));
  RETURN_IF_ERROR(
      with("shutdown-timeout", [&](const std::string& v, const std::string& w) -> absl::Status {
        absl::StatusOr<absl::Duration> d = ParseDuration(v);
        if (!d.ok()) return Invalid(w, d.status().message());
        c.shutdown_timeout = *d;
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(
      with("monitor-interval", [&](const std::string& v, const std::string& w) -> absl::Status {
        absl::StatusOr<absl::Duration> d = ParseDuration(v);
        if (!d.ok()) return Invalid(w, d.status().message());
        return absl::OkStatus();
      }));
  std::string signals = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  std::string signals_where = "--signals-to-handle";
  RETURN_IF_ERROR(
      with("signals-to-handle", [&](const std::string& v, const std::string& w) -> absl::Status {
        signals = v;
        signals_where = w;
        return absl::OkStatus();
      }));
  {
    absl::StatusOr<std::vector<int>> parsed = ParseSignalList(signals);
    if (!parsed.ok()) return Invalid(signals_where, parsed.status().message());
    c.signals_to_handle = *parsed;
  }
  RETURN_IF_ERROR(with("log-dir", [&](const std::string& v, const std::string& w) -> absl::Status {
    if (v.empty()) return Invalid(w, "must not be empty");
    c.log_dir = v;
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(
      with("redirects", [&](const std::string& v, const std::string& w) -> absl::Status {
        ASSIGN_OR_RETURN(c.redirects, ParseStreams(w, v));
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(with("tee", [&](const std::string& v, const std::string& w) -> absl::Status {
    ASSIGN_OR_RETURN(c.tee, ParseStreams(w, v));
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(
      with("local-ranks-filter", [&](const std::string& v, const std::string& w) -> absl::Status {
        // As torchrun: comma-separated ranks, no empty entry.
        for (absl::string_view part : absl::StrSplit(v, ',')) {
          ASSIGN_OR_RETURN(int r, ParseNonNegative(w, part));
          c.local_ranks_filter.insert(r);
        }
        return absl::OkStatus();
      }));
  if (auto e = env.find("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"); e != env.end()) {
    c.log_line_prefix_template = e->second;
  }
  RETURN_IF_ERROR(with("log-line-prefix-template", [&](const std::string& v, const std::string&) {
    c.log_line_prefix_template = v;
    return absl::OkStatus();
  }));
  if (auto v = lookup("log-level")) {
    c.sources["log-level"] = v->second;
    ASSIGN_OR_RETURN(c.log_level, LogLevel(v->second, v->first));
  } else if (auto e = env.find("LOGLEVEL"); e != env.end() && !e->second.empty()) {
    c.sources["log-level"] = "LOGLEVEL";
    ASSIGN_OR_RETURN(c.log_level, LogLevel("LOGLEVEL", e->second));
  }
  RETURN_IF_ERROR(with("event-log", [&](const std::string& v, const std::string&) {
    c.event_log = v;
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(with("status-file", [&](const std::string& v, const std::string&) {
    c.status_file = v;
    return absl::OkStatus();
  }));
  if (access("/dev/termination-log", W_OK) == 0) c.termination_log = "/dev/termination-log";
  RETURN_IF_ERROR(with("termination-log", [&](const std::string& v, const std::string&) {
    c.termination_log = v;
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(
      with("health-port", [&](const std::string& v, const std::string& w) -> absl::Status {
        ASSIGN_OR_RETURN(c.health_port, ParseNonNegative(w, v));
        if (c.health_port > 65535) return Invalid(w, absl::StrCat("'", v, "' is not a port"));
        return absl::OkStatus();
      }));
  if (auto e = env.find("PYTHON_EXEC"); e != env.end() && !e->second.empty()) {
    c.python_exec = e->second;
  }

  // Cross-checks.
  if (c.nproc_per_node == 0) {
    // --nproc-per-node gpu with no /dev/nvidiaN: only the probe can still find GPUs.
    if (c.probe == "off" || !DriverMayBePresent(env)) {
      return Invalid(
          c.sources.count("nproc-per-node") ? c.sources["nproc-per-node"] : "--nproc-per-node",
          "'gpu' but no GPU is visible (no NVIDIA driver, no /dev/nvidiaN, or "
          "CUDA_VISIBLE_DEVICES empty); give a number or 'cpu'");
    }
  }
  if (c.module && c.no_python) {
    return Invalid("--module", "cannot be combined with --no-python (a module needs Python)");
  }
  for (const char* var : kNumericNodeVars) {
    auto e = env.find(var);
    if (e == env.end()) continue;
    int value = 0;
    if (!absl::SimpleAtoi(e->second, &value) || value < 0) {
      return Invalid(var, absl::StrCat("'", e->second,
                                       "' in the environment is not a non-negative integer; "
                                       "fix or unset it (operators set it per node)"));
    }
  }
  if (c.command.empty() && !c.debug) {
    return Invalid("command", "missing; usage: muster run [flags] [--] SCRIPT_OR_CMD [ARGS...]");
  }
  if (!c.module && !c.no_python && StartsWithInterpreter(c.command)) {
    // `muster run -- python train.py` (a Pod's command with muster in front) runs as given,
    // the interpreter from PATH as the Pod had it, not as `python3 -u python train.py`.
    c.no_python = true;
    c.sources["no-python"] = absl::StrCat("the command starts with ", c.command[0]);
  }
  if (!c.module && !c.no_python && !c.command.empty()) {
    struct stat st;
    if (stat(c.command[0].c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return Invalid("training script",
                     absl::StrCat("'", c.command[0], "' not found from ",
                                  "the current directory; "
                                  "give the script's path, or use -m for a module or --no-python "
                                  "for a program"));
    }
  }
  if (!c.log_dir.empty()) {
    // mkdir -p, then prove we can create a file there.
    std::string partial;
    for (absl::string_view part : absl::StrSplit(c.log_dir, '/')) {
      absl::StrAppend(&partial, part, "/");
      if (part.empty()) continue;
      if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return Invalid(c.sources["log-dir"],
                       absl::StrCat("cannot create '", partial, "': ", strerror(errno),
                                    "; choose a writable directory"));
      }
    }
    std::string probe = absl::StrCat(c.log_dir, "/.muster_write_test");
    int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      return Invalid(c.sources["log-dir"],
                     absl::StrCat("'", c.log_dir, "' is not writable: ", strerror(errno),
                                  "; choose a writable directory"));
    }
    close(fd);
    unlink(probe.c_str());
  }
  return c;
}

}  // namespace muster
