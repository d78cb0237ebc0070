#include "agent/workers/debug_mode.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/config/subcommand.h"
#include "agent/lifecycle/debug_dir_owner.h"
#include "agent/lifecycle/status_file.h"
#include "base/errno_status.h"
#include "base/exit_codes.h"
#include "base/log_format.h"
#include "base/shell_words.h"
#include "base/unique_fd.h"
#include "launch/spawner.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace muster {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus("open " + path, errno);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

constexpr FlagSpec kExecFlags[] = {
    {.name = "rank",
     .group = "Exec",
     .default_text = "required",
     .help = "the global rank to start"},
    {.name = "debug-dir",
     .group = "Exec",
     .default_text = "/run/muster",
     .help = "where `muster run --debug` wrote its files"},
};

constexpr Subcommand kExec = {
    .name = "exec",
    .usage = "Usage: muster exec --rank N [--debug-dir D] [--] [CMD...]\n",
    .flags = kExecFlags,
};

}  // namespace

const Subcommand& ExecSubcommand() { return kExec; }

std::string EnvFileText(const std::map<std::string, std::string>& agent_env,
                        const std::vector<std::string>& worker_env) {
  std::string out = "# written by muster run --debug: source it, or use muster exec --rank N\n";
  for (const std::string& kv : worker_env) {
    size_t eq = kv.find('=');
    std::string name = kv.substr(0, eq), value = kv.substr(eq + 1);
    auto it = agent_env.find(name);
    if (it != agent_env.end() && it->second == value) continue;
    if (name == "MUSTER_TOKEN") continue;
    absl::StrAppend(&out, "export ", name, "=", ShellQuote(value), "\n");
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> ParseEnvFile(const std::string& text) {
  std::map<std::string, std::string> env;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line[0] == '#') continue;
    if (line.substr(0, 7) != "export ") {
      return absl::InvalidArgumentError(absl::StrCat("unexpected line: ", line));
    }
    line.remove_prefix(7);
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '\'') {
      return absl::InvalidArgumentError(absl::StrCat("unexpected line: ", line));
    }
    std::string name(line.substr(0, eq)), value;
    absl::string_view rest = line.substr(eq + 2);
    // 'a'\''b' -> a'b
    for (;;) {
      size_t close = rest.find('\'');
      if (close == absl::string_view::npos) return absl::InvalidArgumentError("unterminated quote");
      absl::StrAppend(&value, rest.substr(0, close));
      rest.remove_prefix(close + 1);
      if (rest.substr(0, 3) != "\\''") break;
      value += '\'';
      rest.remove_prefix(3);
    }
    env[name] = value;
  }
  return env;
}

std::string HostfileText(const rdzv::Assignment& a) {
  std::string out;
  for (const rdzv::NodeInfo& n : a.nodes) {
    absl::StrAppend(&out, n.address.empty() ? n.host : n.address, " slots=", n.local_world_size,
                    "\n");
  }
  return out;
}

absl::Status WriteRankFiles(const std::string& dir, int rank, const std::string& env_text,
                            const std::vector<std::string>& argv) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + dir, errno);
  std::string joined;
  for (const std::string& a : argv) absl::StrAppend(&joined, a, std::string(1, '\0'));
  if (absl::Status s = WriteFileAtomically(absl::StrCat(dir, "/rank-", rank, ".env"), env_text);
      !s.ok()) {
    return s;
  }
  return WriteFileAtomically(absl::StrCat(dir, "/rank-", rank, ".argv"), joined);
}

bool UsesDefaultSshd(const Config& config) {
  return config.debug_command.empty() && access("/usr/sbin/sshd", X_OK) == 0;
}

absl::Status CheckDebugPort(const Config& config) {
  if (!UsesDefaultSshd(config)) return absl::OkStatus();
  UniqueFd fd(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::OkStatus();  // no IPv6 socket: sshd's own error will say
  int on = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in6 any{.sin6_family = AF_INET6, .sin6_port = htons(config.debug_port)};
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&any), sizeof(any)) == 0 || errno != EADDRINUSE) {
    return absl::OkStatus();  // free (EACCES and the like: sshd reports them itself)
  }
  // Outside a container, port 22 is the host's own sshd: a second one there fails, or
  // worse, a user's ssh reaches debug mode thinking it is the host.
  return absl::FailedPreconditionError(absl::StrCat(
      "--debug-port ", config.debug_port, ": something on this host already listens there ",
      "(the host's own sshd?); give debug mode's sshd another port, e.g. --debug-port 2222, ",
      "or set --debug-command"));
}

absl::StatusOr<std::string> PrepareDebugRound(const Config& config, const WorkerPlan& workers,
                                              const rdzv::Assignment& a,
                                              const std::vector<WorkerSpec>& specs) {
  for (const WorkerSpec& spec : specs) {
    absl::Status st = WriteRankFiles(
        config.debug_dir, spec.placement.rank, EnvFileText(workers.env_base, spec.spawn.env),
        config.command.empty() ? std::vector<std::string>{} : spec.spawn.argv);
    if (!st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--debug-dir ", config.debug_dir, ": ", st.message()));
    }
  }
  absl::Status hs =
      WriteFileAtomically(absl::StrCat(config.debug_dir, "/hostfile"), HostfileText(a));
  if (!hs.ok()) spdlog::warn("cannot write the debug hostfile: {}", hs.message());
  std::string command = config.debug_command;
  if (command.empty()) {
    // sshd refuses to start without its privilege-separation directory, which only an init
    // system creates; -e sends its log to stderr (a pod has no syslog).
    command = UsesDefaultSshd(config)
                  ? absl::StrCat("mkdir -p -m 755 /run/sshd && exec /usr/sbin/sshd -D -e -p ",
                                 config.debug_port)
                  : "sleep infinity";
  }
  spdlog::info(
      "debug mode: ranks {}..{} prepared in {} (source rank-N.env, or `muster exec --rank N "
      "--debug-dir {} [-- CMD]`); running: {}",
      a.rank_base, a.rank_base + workers.nproc - 1, config.debug_dir, config.debug_dir, command);
  return command;
}

int ExecCommand(const std::vector<std::string>& args,
                const std::map<std::string, std::string>& env) {
  int code = exit_code::kSuccess;
  std::optional<FlagValues> values = StartSubcommand(kExec, args, env, &code);
  if (!values) return code;
  int rank = -1;
  auto r = values->Get("rank");
  if (!r || !absl::SimpleAtoi(r->text, &rank) || rank < 0) {
    return UsageError(kExec, "--rank: give the global rank to start, e.g. --rank 0");
  }
  std::string dir = values->TextOr("debug-dir", "/run/muster");
  if (absl::Status owner = CheckDebugDirOwner(dir); !owner.ok()) {
    return UsageError(kExec, std::string(owner.message()));
  }
  std::string env_path = absl::StrCat(dir, "/rank-", rank, ".env");
  absl::StatusOr<std::string> text = ReadFile(env_path);
  if (!text.ok()) {
    return UsageError(
        kExec, absl::StrCat("no environment for rank ", rank, " (", text.status().message(),
                            "); is `muster run --debug` running on this node with --debug-dir ",
                            dir, "?"));
  }
  absl::StatusOr<std::map<std::string, std::string>> rank_env = ParseEnvFile(*text);
  if (!rank_env.ok()) {
    return UsageError(kExec, absl::StrCat(env_path, ": ", rank_env.status().message()));
  }
  std::vector<std::string> argv = values->rest();
  if (argv.empty()) {
    absl::StatusOr<std::string> recorded = ReadFile(absl::StrCat(dir, "/rank-", rank, ".argv"));
    if (recorded.ok()) argv = absl::StrSplit(*recorded, '\0', absl::SkipEmpty());
    if (argv.empty()) return UsageError(kExec, "no command given and none recorded; add -- CMD...");
  }
  for (const auto& [k, v] : *rank_env) setenv(k.c_str(), v.c_str(), 1);
  const char* path_env = getenv("PATH");
  absl::StatusOr<std::string> exe = ResolveExecutable(argv[0], path_env ? path_env : "");
  if (!exe.ok()) {
    std::fprintf(stderr, "muster exec: %s\n", std::string(exe.status().message()).c_str());
    return ExecFailureExitCode(exe.status());
  }
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execv(exe->c_str(), cargv.data());
  std::fprintf(stderr, "muster exec: cannot execute %s: %s\n", exe->c_str(), strerror(errno));
  return errno == ENOENT ? exit_code::kNotFound : exit_code::kNotExecutable;
}

}  // namespace muster
