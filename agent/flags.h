// `muster run` flag parsing: torchrun's names in dash and underscore spellings,
// each also settable as MUSTER_<FLAG> and (torchrun/Kubeflow) PET_<FLAG>. Every
// error names the flag or variable and how to fix it; the caller exits 2 on any
// error.
#ifndef MUSTER_AGENT_FLAGS_H_
#define MUSTER_AGENT_FLAGS_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/config.h"

namespace muster {

// What the machine offers, for --nproc-per-node cpu|gpu|auto (injectable for
// tests).
struct HostInfo {
  int cpus = 1;
  int gpus = 0;
  static HostInfo Detect(const std::map<std::string, std::string>& env);
};

// `args` are the words after `muster run`; `env` the agent's environment.
// Returns the config, or InvalidArgument naming the flag or variable. Check
// RunHelpRequested first.
absl::StatusOr<Config> ParseRunFlags(const std::vector<std::string>& args,
                                     const std::map<std::string, std::string>& env,
                                     const HostInfo& host);

// The rendezvous flags (--rdzv-endpoint, --rdzv-conf, --node-rank, --local-addr, token, TLS),
// resolved with the same precedence; part of ParseRunFlags, exposed for `muster serve`.
using FlagLookup = std::function<std::optional<std::pair<std::string, std::string>>(const char*)>;
absl::Status ParseRendezvousFlags(const FlagLookup& lookup,
                                  const std::map<std::string, std::string>& env, Config* config);

// The `muster run --help` text (grouped, with defaults).
std::string RunHelp();

// True when args ask for help (-h/--help before the command).
bool RunHelpRequested(const std::vector<std::string>& args);

}  // namespace muster

#endif  // MUSTER_AGENT_FLAGS_H_
