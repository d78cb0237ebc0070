#include "agent/config/config_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace muster {
namespace {

absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

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

absl::Status CheckTlsFilesReadable(const Config& c) {
  for (auto [name, path] : {std::pair<const char*, const std::string*>{"tls-cert", &c.tls_cert},
                            {"tls-key", &c.tls_key},
                            {"tls-ca", &c.tls_ca}}) {
    auto where = c.sources.find(name);
    if (where == c.sources.end()) continue;
    if (access(path->c_str(), R_OK) != 0) {
      return Invalid(where->second, absl::StrCat("cannot read '", *path, "': ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckScriptExists(const Config& c) {
  if (c.module || c.no_python || c.command.empty()) return absl::OkStatus();
  struct stat st;
  if (stat(c.command[0].c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Invalid("training script",
                   absl::StrCat("'", c.command[0],
                                "' not found from the current directory; give the script's "
                                "path, or use -m for a module or --no-python for a program"));
  }
  return absl::OkStatus();
}

// mkdir -p, then prove we can create a file there.
absl::Status MakeWritableLogDir(const Config& c) {
  if (c.log_dir.empty()) return absl::OkStatus();
  auto source = c.sources.find("log-dir");
  std::string where = source == c.sources.end() ? "" : source->second;
  std::string partial;
  for (absl::string_view part : absl::StrSplit(c.log_dir, '/')) {
    absl::StrAppend(&partial, part, "/");
    if (part.empty()) continue;
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return Invalid(where, absl::StrCat("cannot create '", partial, "': ", strerror(errno),
                                         "; choose a writable directory"));
    }
  }
  std::string probe = absl::StrCat(c.log_dir, "/.muster_write_test");
  int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Invalid(where, absl::StrCat("'", c.log_dir, "' is not writable: ", strerror(errno),
                                       "; choose a writable directory"));
  }
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRunConfig(Config* c) {
  RETURN_IF_ERROR(CheckTlsFilesReadable(*c));
  if (!c->module && !c->no_python && StartsWithInterpreter(c->command)) {
    // `muster run -- python train.py` (a Pod's command with muster in front) runs as given,
    // the interpreter from PATH as the Pod had it, not as `python3 -u python train.py`.
    c->no_python = true;
    c->sources["no-python"] = absl::StrCat("the command starts with ", c->command[0]);
  }
  RETURN_IF_ERROR(CheckScriptExists(*c));
  return MakeWritableLogDir(*c);
}

}  // namespace muster
