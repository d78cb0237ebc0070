#include "agent/config/torchrun_compat.h"

#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/config/etcd_security_flags.h"
#include "agent/config/flag_parsers.h"
#include "base/status_macros.h"
#include "base/wire_values.h"

namespace muster {
namespace {

std::string Quoted(const std::string& text) {
  return absl::StrCat("'", EscapeForMessage(text), "'");
}

}  // namespace

absl::Status CheckStartMethod(const FlagValue& v, Config*) {
  if (v.text == "spawn" || v.text == "fork" || v.text == "forkserver") return absl::OkStatus();
  return FlagError(v.where, absl::StrCat(Quoted(v.text), " must be spawn, fork or forkserver"));
}

absl::Status ApplyRunPath(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(bool run_path, ParseSwitch(v));
  if (run_path) c->module = c->no_python = false;
  return absl::OkStatus();
}

absl::Status ApplyUseEnv(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(bool use_env, ParseSwitch(v));
  if (use_env) c->legacy_local_rank_arg = false;
  return absl::OkStatus();
}

absl::Status CheckEventLogHandler(const FlagValue& v, Config*) {
  if (v.text == "null" || v.text == "console" || v.text == "dynamic_rendezvous") {
    return absl::OkStatus();
  }
  return FlagError(v.where, absl::StrCat(Quoted(v.text),
                                         " is not one of torchrun's handlers (null, console, "
                                         "dynamic_rendezvous), and muster cannot load one "
                                         "registered in Python; --event-log FILE appends "
                                         "muster's events as JSON lines"));
}

absl::Status CheckLogsSpecs(const FlagValue& v, Config*) {
  if (v.text == "default") return absl::OkStatus();
  return FlagError(
      v.where,
      absl::StrCat("names a Python LogsSpecs plugin, which muster cannot load (", Quoted(v.text),
                   "; torch's own 'default' is accepted); muster "
                   "writes the per-rank logs itself: --log-dir DIR, -r/--redirects, "
                   "-t/--tee and --local-ranks-filter choose where each stream goes"));
}

absl::Status ApplyNumaBinding(const FlagValue& v, Config* c) {
  absl::StatusOr<NumaBindingMode> mode = ParseNumaBindingMode(v.text);
  if (!mode.ok()) return FlagError(v.where, std::string(mode.status().message()));
  c->numa_binding = *mode;
  return absl::OkStatus();
}

absl::Status RefuseDuplicateFilters(const FlagValue& v, Config*) {
  return FlagError(v.where,
                   "muster does not copy matching lines to another file; with --log-dir DIR "
                   "and -t 3 every rank's output is in DIR/<run_id>_*/attempt_N/<local_rank>/"
                   "stdout.log and stderr.log, to filter afterwards");
}

absl::Status RefusePrintCompletion(const FlagValue& v, Config*) {
  return FlagError(v.where,
                   "muster has no shell completion script; `muster run --help` lists every "
                   "flag");
}

std::optional<absl::Status> ApplyTorchRdzvConfKey(const std::string& where, const std::string& key,
                                                  const std::string& value, Config* c) {
  if (key == "rank") {
    std::string source = absl::StrCat(where, " rank");
    ASSIGN_OR_RETURN(int rank, ParseNonNegative(source, value));
    if (rank >= c->max_nodes) {
      return FlagError(source, absl::StrCat(rank, " is outside 0..", c->max_nodes - 1, " (",
                                            c->SourceOf("nnodes"), " allows ", c->max_nodes,
                                            c->max_nodes == 1 ? " node)" : " nodes)"));
    }
    c->node_rank = rank;
    c->sources["node-rank"] = source;  // --node-rank, applied later, wins
    return absl::OkStatus();
  }
  if (key == "store_type") {
    std::string type = absl::AsciiStrToLower(value);
    if (type == "tcp") return absl::OkStatus();
    if (type == "file") {
      return FlagError(where,
                       "store_type=file: muster's rendezvous and store run over TCP and have no "
                       "FileStore form; drop store_type (or write store_type=tcp)");
    }
    return FlagError(where, absl::StrCat("store_type: ", Quoted(value), " must be tcp"));
  }
  if (key == "use_libuv") {
    if (ParseTorchBool(value)) return absl::OkStatus();
    return FlagError(
        where, absl::StrCat("use_libuv: ", Quoted(value), " is not a boolean; use true or false"));
  }
  if (key == "etcd_prefix") {
    if (value.front() != '/') {
      return FlagError(where, absl::StrCat("etcd_prefix: ", Quoted(value), " must start with /"));
    }
    c->etcd_prefix = value.back() == '/' ? value.substr(0, value.size() - 1) : value;
    return absl::OkStatus();
  }
  if (std::optional<absl::Status> etcd = ApplyEtcdSecurityKey(where, key, value, c)) return etcd;
  return std::nullopt;
}

std::optional<std::vector<std::string>> VirtualLocalDevices(
    const std::map<std::string, std::string>& agent_env) {
  auto it = agent_env.find("CUDA_VISIBLE_DEVICES");
  if (it == agent_env.end()) return std::nullopt;
  std::vector<std::string> devices;
  for (absl::string_view d : absl::StrSplit(it->second, ',')) {
    devices.emplace_back(absl::StripAsciiWhitespace(d));
  }
  return devices;
}

std::string VirtualLocalDevice(const std::map<std::string, std::string>& agent_env,
                               int local_rank) {
  std::optional<std::vector<std::string>> devices = VirtualLocalDevices(agent_env);
  if (!devices) return std::to_string(local_rank);
  return local_rank < static_cast<int>(devices->size()) ? (*devices)[local_rank] : "";
}

absl::Status CheckTorchrunFlags(const std::map<std::string, std::string>& env, const Config& c) {
  if (c.numa_binding && c.bind_cores_to_rank) {
    const char* other = c.sources.count("bind-core-list") ? "bind-core-list" : "bind-cores-to-rank";
    return FlagError(
        c.SourceOf("numa-binding"),
        absl::StrCat("places each worker on the CPUs near its GPU, and ", c.SourceOf(other),
                     " shares out the CPUs another way: keep one of them"));
  }
  if (!c.virtual_local_rank) return absl::OkStatus();
  std::optional<std::vector<std::string>> devices = VirtualLocalDevices(env);
  if (!devices || c.nproc_per_node <= static_cast<int>(devices->size())) {
    return absl::OkStatus();
  }
  size_t n = devices->size();
  return FlagError(c.SourceOf("virtual-local-rank"),
                   absl::StrCat("gives each worker one device of CUDA_VISIBLE_DEVICES=",
                                Quoted(env.at("CUDA_VISIBLE_DEVICES")), ", which lists ", n,
                                n == 1 ? " device" : " devices", " for ", c.nproc_per_node,
                                " workers (", c.SourceOf("nproc-per-node"), "); start at most ", n,
                                " per node or list more devices"));
}

}  // namespace muster
