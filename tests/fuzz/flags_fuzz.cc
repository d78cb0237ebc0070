// libFuzzer target for `muster run`'s flag and environment parsing (agent/config/run_flags.cc,
// rendezvous_flags.cc, flag_table.cc, conventions.cc and the value parsers they call) and
// the check against the filesystem after it (config_check.cc). The input is decoded into
// an argv, an environment and the host's facts; ParseRunFlags and CheckRunConfig must never
// crash, and what they accept must be a usable configuration (Check below lists the
// invariants). Dash and underscore spellings must give the same result.
//
// Input: byte 0 and 1 are the host's CPU and GPU counts (the GPU byte's high bits: a driver
// may be present, /dev/termination-log is writable, the hostname is "job-0"), then
// records, each starting with an opcode byte (op % 8):
//   0-2  a known flag (next byte picks it from RunHelp's table; the byte after chooses
//        the spelling: underscore, inline "=", a stray "=value" on a switch), then a value
//   3    MUSTER_<FLAG> or PET_<FLAG> for a known flag, then a value
//   4    an operator variable (WORLD_SIZE, RANK, MASTER_ADDR, ...), then a value
//   5    a raw argv word
//   6    "--", then a command word from the values
//   7    a raw environment variable (name, value)
// A value is one byte: < 0xC0 picks a dictionary entry (flags_fuzz_values.h), else 0..63
// raw bytes follow.
//
// Paths that are read or created (--log-dir is mkdir -p'd, --token-file read) are mapped
// into a scratch directory, so fuzzing never touches the rest of the filesystem.
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/config_check.h"
#include "agent/config/host_info.h"
#include "agent/config/run_flags.h"
#include "base/duration.h"
#include "base/wire_values.h"
#include "launch/cpu_topology.h"
#include "launch/restart_policy.h"
#include "launch/signals.h"
#include "tests/fuzz/flags_fuzz_values.h"

namespace muster {
namespace {

struct Flag {
  std::string name;  // dash spelling without "--"
  bool takes_value;
};

struct Fixture {
  std::string root;  // scratch directory
  std::vector<Flag> flags;
  std::vector<std::string> values;   // dictionary
  std::vector<std::string> paths;    // what path-valued flags are mapped to
  std::set<std::string> path_flags;  // names whose values are paths we must contain
  std::set<std::string> path_env;    // the same, as variables
};

Fixture* fixture = nullptr;

// Flags as RunHelp() lists them ("  -m, --module", "      --nnodes V"), so new flags are
// fuzzed without touching this file.
std::vector<Flag> FlagsFromHelp() {
  std::vector<Flag> out;
  std::string help = RunHelp();
  size_t at = 0;
  while ((at = help.find("\n  ", at)) != std::string::npos) {
    ++at;
    size_t end = help.find('\n', at);
    std::string_view line(help.data() + at, end - at);
    size_t dash = line.find("--");
    if (dash == std::string_view::npos || dash > 8) continue;
    size_t name_end = line.find(' ', dash);
    std::string name(line.substr(dash + 2, name_end - dash - 2));
    bool takes_value = line.substr(name_end, 2) == " V";
    out.push_back({.name = name, .takes_value = takes_value});
  }
  return out;
}

void RemoveTree(const std::string& root) {
  nftw(
      root.c_str(),
      [](const char* path, const struct stat*, int, struct FTW*) { return remove(path); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

Fixture* MakeFixture() {
  auto* f = new Fixture;
  char tmpl[] = "/tmp/muster-flags-fuzz-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    perror("mkdtemp");
    abort();
  }
  f->root = tmpl;
  static std::string root_for_exit = f->root;
  atexit([] { RemoveTree(root_for_exit); });
  mkdir((f->root + "/dir").c_str(), 0755);
  WriteFile(f->root + "/train.py", "print('hi')\n");
  WriteFile(f->root + "/token", "s3cret \n");
  WriteFile(f->root + "/blank", " \n\t");
  WriteFile(f->root + "/empty", "");
  f->flags = FlagsFromHelp();
  if (f->flags.size() < 20) {
    fprintf(stderr, "flags_fuzz: only %zu flags found in RunHelp()\n", f->flags.size());
    abort();
  }
  f->paths = {"",
              f->root + "/logs",
              f->root + "/deep/a/b/",
              f->root + "/token",
              f->root + "/blank",
              f->root + "/empty",
              f->root + "/dir",
              f->root + "/token/below",
              f->root + "//double//slash",
              f->root + "/missing.pem",
              "/proc/self/no-such-dir/x"};
  f->path_flags = {"log-dir", "enable-each-rank-log", "token-file", "tls-cert", "tls-key",
                   "tls-ca"};
  for (const std::string& name : f->path_flags) {
    std::string var = name;
    for (char& ch : var) ch = ch == '-' ? '_' : static_cast<char>(toupper(ch));
    f->path_env.insert("MUSTER_" + var);
    f->path_env.insert("PET_" + var);
  }
  f->values = FlagsFuzzValues(f->root);
  return f;
}

class Decoder {
 public:
  Decoder(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::string Raw(size_t len) {
    len = std::min(len, size_ - std::min(pos_, size_));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }
  std::string Value() {
    uint8_t b = Byte();
    if (b < 0xC0) return fixture->values[b % fixture->values.size()];
    return Raw(b - 0xC0);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

std::string EnvName(const std::string& flag, bool pet) {
  std::string var = flag;
  for (char& ch : var) ch = ch == '-' ? '_' : static_cast<char>(toupper(ch));
  return (pet ? "PET_" : "MUSTER_") + var;
}

const char* const kOperatorVars[] = {"WORLD_SIZE",
                                     "RANK",
                                     "NODE_RANK",
                                     "MASTER_ADDR",
                                     "MASTER_PORT",
                                     "PET_NNODES",
                                     "PET_NODE_RANK",
                                     "PET_MASTER_ADDR",
                                     "PET_MASTER_PORT",
                                     "VC_TASK_INDEX",
                                     "VK_TASK_INDEX",
                                     "JOB_COMPLETION_INDEX",
                                     "POD_IP",
                                     "CUDA_VISIBLE_DEVICES",
                                     "NVIDIA_VISIBLE_DEVICES",
                                     "MUSTER_TOKEN",
                                     "PYTHON_EXEC",
                                     "LOGLEVEL",
                                     "MUSTER_LIBCUDA",
                                     "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
                                     "MUSTER_DEBUG",
                                     "PET_NPROC_PER_NODE"};

std::string Contained(const std::string& value) {
  if (value.empty()) return value;
  return fixture->paths[static_cast<uint8_t>(value[0]) % fixture->paths.size()];
}

// Maps every value the parser would treat as a path to read or create into the scratch
// directory (see the file comment).
void ContainPaths(std::vector<std::string>* args, std::map<std::string, std::string>* env) {
  for (size_t i = 0; i < args->size(); ++i) {
    std::string& word = (*args)[i];
    if (word.rfind("--", 0) != 0) continue;
    size_t eq = word.find('=');
    std::string name = word.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    for (char& ch : name) ch = ch == '_' ? '-' : ch;
    if (fixture->path_flags.count(name) == 0) continue;
    if (eq != std::string::npos) {
      word = word.substr(0, eq + 1) + Contained(word.substr(eq + 1));
    } else if (i + 1 < args->size()) {
      (*args)[i + 1] = Contained((*args)[i + 1]);
    }
  }
  for (auto& [name, value] : *env) {
    if (fixture->path_env.count(name)) value = Contained(value);
  }
}

struct Case {
  HostInfo host;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::vector<std::string> values;  // every decoded value, for the value parsers
};

Case Decode(const uint8_t* data, size_t size) {
  Decoder d(data, size);
  Case c;
  c.host.cpus = 1 + d.Byte() % 128;
  uint8_t gpu = d.Byte();
  c.host.gpus = (gpu & 0x1F) % 17;
  c.host.driver_may_be_present = gpu & 0x20;
  c.host.termination_log_writable = gpu & 0x40;
  if (gpu & 0x80) c.host.hostname = "job-0";
  const std::vector<Flag>& flags = fixture->flags;
  while (!d.done() && c.args.size() < 64) {
    uint8_t op = d.Byte() % 8;
    if (op <= 2) {
      const Flag& f = flags[d.Byte() % flags.size()];
      uint8_t spelling = d.Byte();
      std::string word = "--" + f.name;
      if (spelling & 1) {
        for (size_t i = 2; i < word.size(); ++i) word[i] = word[i] == '-' ? '_' : word[i];
      }
      if (f.takes_value) {
        std::string value = d.Value();
        c.values.push_back(value);
        if (spelling & 2) {
          c.args.push_back(word + "=" + value);
        } else {
          c.args.push_back(word);
          c.args.push_back(value);
        }
      } else {
        c.args.push_back((spelling & 4) ? word + "=" + d.Value() : word);
      }
    } else if (op == 3) {
      const Flag& f = flags[d.Byte() % flags.size()];
      bool pet = d.Byte() & 1;
      c.values.push_back(d.Value());
      c.env[EnvName(f.name, pet)] = c.values.back();
    } else if (op == 4) {
      const char* var = kOperatorVars[d.Byte() % std::size(kOperatorVars)];
      c.values.push_back(d.Value());
      c.env[var] = c.values.back();
    } else if (op == 5) {
      c.args.push_back(d.Raw(d.Byte() % 64));
    } else if (op == 6) {
      c.args.push_back("--");
      c.args.push_back(d.Value());
    } else {
      std::string name = d.Raw(d.Byte() % 32);
      c.env[name] = d.Value();
    }
  }
  ContainPaths(&c.args, &c.env);
  return c;
}

[[noreturn]] void Fail(const Case& c, const std::string& what) {
  fprintf(stderr, "flags_fuzz: invariant broken: %s\n  argv:", what.c_str());
  for (const std::string& a : c.args) fprintf(stderr, " '%s'", a.c_str());
  fprintf(stderr, "\n  env:");
  for (const auto& [k, v] : c.env) fprintf(stderr, " %s='%s'", k.c_str(), v.c_str());
  fprintf(stderr, "\n  host: cpus=%d gpus=%d driver=%d termination-log=%d hostname='%s'\n",
          c.host.cpus, c.host.gpus, c.host.driver_may_be_present, c.host.termination_log_writable,
          c.host.hostname.c_str());
  abort();
}

#define CHECK_OR_FAIL(cond, what) \
  if (!(cond)) Fail(c, absl::StrCat(#cond, ": ", what))

bool Finite(absl::Duration d) {
  return d != absl::InfiniteDuration() && d != -absl::InfiniteDuration();
}

// What a configuration ParseRunFlags accepted must satisfy: the agent uses these values
// without checking them again.
void Check(const Case& c, const Config& cfg) {
  CHECK_OR_FAIL(cfg.min_nodes >= 1 && cfg.min_nodes <= cfg.max_nodes,
                absl::StrCat("nnodes ", cfg.min_nodes, ":", cfg.max_nodes));
  CHECK_OR_FAIL(cfg.node_rank == -1 || (cfg.node_rank >= 0 && cfg.node_rank < cfg.max_nodes),
                absl::StrCat("node_rank ", cfg.node_rank, " of ", cfg.max_nodes));
  // Port 0 is torchrun's "any free port": one node only, and an endpoint with it leaves the
  // rendezvous in the agent (FinishAnyFreePort).
  CHECK_OR_FAIL((cfg.rdzv_port >= 1 && cfg.rdzv_port <= 65535) ||
                    (cfg.rdzv_port == 0 && cfg.max_nodes == 1 && cfg.rdzv_host_name.empty()),
                absl::StrCat("rdzv_port ", cfg.rdzv_port));
  CHECK_OR_FAIL((cfg.master_port >= 1 && cfg.master_port <= 65535) ||
                    (cfg.master_port == 0 && cfg.max_nodes == 1),
                absl::StrCat("master_port ", cfg.master_port));
  CHECK_OR_FAIL(cfg.health_port >= -1 && cfg.health_port <= 65535,
                absl::StrCat("health_port ", cfg.health_port));
  CHECK_OR_FAIL(cfg.metrics_port >= -1 && cfg.metrics_port <= 65535,
                absl::StrCat("metrics_port ", cfg.metrics_port));
  CHECK_OR_FAIL(cfg.max_nodes == 1 || !cfg.rdzv_host_name.empty(), "multi-node needs endpoint");
  // 0 workers: only `gpu` with no GPU seen yet, left for the GPU probe to resolve.
  CHECK_OR_FAIL(
      cfg.nproc_per_node >= 1 || (cfg.nproc_per_node == 0 && cfg.nproc_spec == "gpu" &&
                                  cfg.probe != ProbeMode::kOff && c.host.driver_may_be_present),
      absl::StrCat("nproc_per_node ", cfg.nproc_per_node, " from '", cfg.nproc_spec, "'"));
  if (cfg.nproc_spec == "cpu") CHECK_OR_FAIL(cfg.nproc_per_node == c.host.cpus, "cpu count");
  if (cfg.nproc_spec == "gpu") CHECK_OR_FAIL(cfg.nproc_per_node == c.host.gpus, "gpu count");
  CHECK_OR_FAIL(cfg.max_restarts >= 0, absl::StrCat(cfg.max_restarts));
  CHECK_OR_FAIL(cfg.heartbeat_misses >= 1, absl::StrCat(cfg.heartbeat_misses));
  CHECK_OR_FAIL(cfg.heartbeat_interval > absl::ZeroDuration(), "heartbeat_interval");
  for (absl::Duration d : {cfg.join_timeout, cfg.last_call_timeout, cfg.heartbeat_interval,
                           cfg.shutdown_timeout, cfg.probe_timeout}) {
    CHECK_OR_FAIL(d >= absl::ZeroDuration() && Finite(d),
                  absl::StrCat("duration ", absl::FormatDuration(d)));
  }
  CHECK_OR_FAIL(cfg.probe_timeout > absl::ZeroDuration(), "probe_timeout");
  CHECK_OR_FAIL(cfg.tls_cert.empty() == cfg.tls_key.empty(), "tls cert/key");
  CHECK_OR_FAIL(!(cfg.module && cfg.no_python), "module with no-python");
  CHECK_OR_FAIL(!cfg.command.empty() || cfg.debug, "no command");
  CHECK_OR_FAIL(!cfg.role.empty() && !cfg.master_addr.empty() && !cfg.debug_dir.empty(),
                "empty role/master_addr/debug_dir");
  // What goes to other processes: proto3 strings (UTF-8 only) and gRPC metadata.
  CHECK_OR_FAIL(CheckRunId("run id", cfg.run_id).ok(), EscapeForMessage(cfg.run_id));
  CHECK_OR_FAIL(CheckHostOrAddress("master addr", cfg.master_addr).ok(),
                EscapeForMessage(cfg.master_addr));
  for (const std::string* host : {&cfg.local_addr, &cfg.rdzv_host_name}) {
    CHECK_OR_FAIL(host->empty() || CheckHostOrAddress("host", *host).ok(), EscapeForMessage(*host));
  }
  CHECK_OR_FAIL(CheckToken("token", cfg.token).ok(), "token not printable ASCII");
  for (int code : cfg.restartable_exit_codes) {
    CHECK_OR_FAIL(code >= 1 && code <= 255, absl::StrCat("exit code ", code));
  }
  for (int sig : cfg.signals_to_handle) {
    CHECK_OR_FAIL(sig >= 1 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP && sig != SIGCHLD,
                  absl::StrCat("signal ", sig));
  }
  for (int cpu : cfg.bind_core_list) {
    CHECK_OR_FAIL(cpu >= 0 && cpu < CPU_SETSIZE, absl::StrCat("cpu ", cpu));
  }
  for (const StreamSelection* s : {&cfg.redirects, &cfg.tee}) {
    for (const auto& [rank, mask] : s->by_rank) {
      CHECK_OR_FAIL(rank >= StreamSelection::kAllRanks && mask >= 0 && mask <= 3,
                    absl::StrCat("streams ", rank, ":", mask));
    }
  }
  for (int r : cfg.local_ranks_filter) CHECK_OR_FAIL(r >= 0, absl::StrCat("filter ", r));
  // Pod-level RANK/WORLD_SIZE are node facts; they must never be passed through as worker
  // ranks (docs/design.md §4.8) - the worker environment is built later from the assignment.
  for (const auto& [name, where] : cfg.sources) {
    CHECK_OR_FAIL(!where.empty(), absl::StrCat("empty source for ", name));
  }
}

// Everything a caller can observe, for comparing two parses.
std::string Fingerprint(const absl::StatusOr<Config>& r) {
  if (!r.ok()) return absl::StrCat("error ", r.status().code());
  const Config& c = *r;
  std::string streams;
  for (const StreamSelection* s : {&c.redirects, &c.tee}) {
    for (const auto& [rank, mask] : s->by_rank) absl::StrAppend(&streams, rank, ":", mask, ",");
    streams += "|";
  }
  std::string sources;
  for (const auto& [k, v] : c.sources) absl::StrAppend(&sources, k, "=", v, ",");
  return absl::StrCat(
      absl::StrJoin(c.command, "\x1f"), "|", c.module, c.no_python, c.local_rank_arg,
      c.bind_cores_to_rank, absl::StrJoin(c.bind_core_list, ","), "|", c.save_pid, "|", c.hostfile,
      "|", c.python_exec, "|", c.min_nodes, ":", c.max_nodes, "|", c.nproc_spec, "|",
      c.nproc_per_node, "|", c.role, c.standalone, c.run_id, "|", ModeName(c.store), "|",
      c.master_addr, ":", c.master_port, c.master_port_given, "|", c.rdzv_host_name, ":",
      c.rdzv_port, ModeName(c.rdzv_hosting), c.node_rank, "|", c.local_addr, "|",
      absl::FormatDuration(c.join_timeout), absl::FormatDuration(c.last_call_timeout),
      absl::FormatDuration(c.heartbeat_interval), c.heartbeat_misses, "|", c.token, "|",
      c.convention, "|", c.tls_cert, c.tls_key, c.tls_ca, "|", c.max_restarts,
      static_cast<int>(c.restart_policy), absl::StrJoin(c.restartable_exit_codes, ","),
      absl::FormatDuration(c.shutdown_timeout), absl::StrJoin(c.signals_to_handle, ","), "|",
      c.log_dir, "|", streams, absl::StrJoin(c.local_ranks_filter, ","), "|",
      c.log_line_prefix_template, "|", c.log_level, c.event_log, c.status_file, c.termination_log,
      c.health_port, c.metrics_port, ModeName(c.probe), ModeName(c.stale_gpu_policy),
      absl::FormatDuration(c.probe_timeout), c.debug, c.debug_command, c.debug_dir, c.dry_run, "|",
      c.virtual_local_rank, "|", sources);
}

// The same command line with every flag (before the command) in the other spelling.
std::vector<std::string> OtherSpelling(const std::vector<std::string>& args) {
  std::vector<std::string> out = args;
  for (size_t i = 0; i < out.size(); ++i) {
    std::string& a = out[i];
    if (a == "--" || a.empty() || a[0] != '-' || a == "-") break;
    size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::string dash = name;
    for (char& ch : dash) ch = ch == '_' ? '-' : ch;
    const Flag* flag = nullptr;
    for (const Flag& f : fixture->flags) {
      std::string under = f.name;
      for (char& ch : under) ch = ch == '-' ? '_' : ch;
      if (a.rfind("--", 0) == 0 && (name == f.name || name == under)) flag = &f;
    }
    if (flag == nullptr) break;  // unknown or short: the parse stops or errs here anyway
    std::string flipped = name == flag->name ? name : flag->name;
    if (name == flag->name) {
      for (char& ch : flipped) ch = ch == '-' ? '_' : ch;
    }
    a = "--" + flipped + (eq == std::string::npos ? "" : a.substr(eq));
    if (flag->takes_value && eq == std::string::npos) ++i;  // skip its value
  }
  return out;
}

void CheckValueParsers(const Case& c, const std::string& v) {
  if (absl::StatusOr<absl::Duration> d = ParseDuration(v); d.ok()) {
    CHECK_OR_FAIL(*d >= absl::ZeroDuration() && Finite(*d), absl::StrCat("duration '", v, "'"));
  }
  if (absl::StatusOr<std::vector<int>> cpus = ParseCpuList(v); cpus.ok()) {
    CHECK_OR_FAIL(!cpus->empty(), v);
    for (int cpu : *cpus) CHECK_OR_FAIL(cpu >= 0 && cpu < CPU_SETSIZE, v);
  }
  if (absl::StatusOr<std::set<int>> codes = ParseExitCodeList(v); codes.ok()) {
    for (int code : *codes) CHECK_OR_FAIL(code >= 1 && code <= 255, v);
  }
  if (absl::StatusOr<std::vector<int>> sigs = ParseSignalList(v); sigs.ok()) {
    for (int sig : *sigs) CHECK_OR_FAIL(sig >= 1 && sig < NSIG, v);
  }
  (void)ParseRestartPolicy(v);
}

// What `muster run` does with the words: parse, then check against the (scratch) filesystem.
absl::StatusOr<Config> ParseAndCheck(const Case& c, const std::vector<std::string>& args) {
  absl::StatusOr<Config> parsed = ParseRunFlags(args, c.env, c.host);
  if (!parsed.ok()) return parsed;
  if (absl::Status checked = CheckRunConfig(&*parsed); !checked.ok()) return checked;
  return parsed;
}

}  // namespace
}  // namespace muster

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  muster::fixture = muster::MakeFixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace muster;
  if (fixture == nullptr) fixture = MakeFixture();
  Case c = Decode(data, size);
  for (const std::string& v : c.values) CheckValueParsers(c, v);
  if (auto it = c.env.find("CUDA_VISIBLE_DEVICES"); it != c.env.end()) {
    HostInfo detected = HostInfo::Detect(c.env);
    CHECK_OR_FAIL(detected.cpus >= 1 && detected.gpus >= 0, "HostInfo::Detect");
  }
  (void)RunHelpRequested(c.args);

  absl::StatusOr<Config> parsed = ParseAndCheck(c, c.args);
  if (parsed.ok()) {
    Check(c, *parsed);
  } else {
    CHECK_OR_FAIL(parsed.status().code() == absl::StatusCode::kInvalidArgument,
                  parsed.status().ToString());
    CHECK_OR_FAIL(!parsed.status().message().empty(), "error without a message");
  }
  Case other = c;
  other.args = OtherSpelling(c.args);
  if (other.args != c.args) {
    absl::StatusOr<Config> again = ParseAndCheck(c, other.args);
    std::string a = Fingerprint(parsed), b = Fingerprint(again);
    // Sources name the flag as "--<dash name>" whatever the spelling, so they match too.
    if (a != b) {
      Fail(c, absl::StrCat("dash/underscore spellings differ:\n    ", a, "\n    ", b,
                           "\n  other argv: ", absl::StrJoin(other.args, " ")));
    }
  }
  return 0;
}
