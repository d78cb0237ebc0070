#include "agent/config/rendezvous_flags.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/config/conventions.h"
#include "agent/config/flag_parsers.h"
#include "agent/config/hang_flags.h"
#include "agent/config/torchrun_compat.h"
#include "base/duration.h"
#include "base/endpoint.h"
#include "base/plural.h"
#include "base/status_macros.h"
#include "base/wire_values.h"

namespace muster {
namespace {

constexpr char kKnownRdzvConfKeys[] =
    "join_timeout (or timeout), last_call_timeout, heartbeat_interval (or keep_alive_interval), "
    "heartbeat_misses (or keep_alive_max_attempt), is_host, rank, hang_timeout, hang_action, "
    "exit_barrier_timeout; torch's read_timeout, close_timeout, heartbeat_timeout, "
    "store_type=tcp and use_libuv are checked and have no effect";

// One KEY=VALUE item of --rdzv-conf (`where`), both stripped and non-empty; nullopt when
// the key is none that muster or torch's backends know.
std::optional<absl::Status> ApplyRdzvConfItem(const std::string& where, const std::string& key,
                                              const std::string& value, Config* c) {
  auto duration = [&](absl::Duration* out) -> absl::Status {
    absl::StatusOr<absl::Duration> d = ParseDuration(value);
    if (!d.ok()) return FlagError(where, absl::StrCat(key, ": ", d.status().message()));
    *out = *d;
    return absl::OkStatus();
  };
  if (key == "join_timeout" || key == "timeout") return duration(&c->join_timeout);
  if (key == "last_call_timeout") return duration(&c->last_call_timeout);
  // keep_alive_*: torch's dynamic rendezvous' names for the same two settings.
  if (key == "heartbeat_interval" || key == "keep_alive_interval") {
    RETURN_IF_ERROR(duration(&c->heartbeat_interval));
    if (c->heartbeat_interval <= absl::ZeroDuration()) {
      return FlagError(where, absl::StrCat(key, " must be positive"));
    }
    return absl::OkStatus();
  }
  if (key == "heartbeat_misses" || key == "keep_alive_max_attempt") {
    if (!absl::SimpleAtoi(value, &c->heartbeat_misses) || c->heartbeat_misses < 1) {
      return FlagError(
          where, absl::StrCat(key, ": '", EscapeForMessage(value), "' must be a positive integer"));
    }
    return absl::OkStatus();
  }
  if (key == "is_host") {
    std::optional<bool> is_host = ParseTorchBool(value);
    if (!is_host) {
      return FlagError(where, absl::StrCat("is_host: '", EscapeForMessage(value),
                                           "' is not a boolean; use true or false "
                                           "(also 1/0, yes/no, t/f, y/n, as torch)"));
    }
    c->rdzv_hosting = *is_host ? RdzvHosting::kAlways : RdzvHosting::kNever;
    return absl::OkStatus();
  }
  // torchrun's exit barrier timeout is --exit-barrier-timeout here.
  if (key == "exit_barrier_timeout") return duration(&c->exit_barrier_timeout);
  if (key == "read_timeout" || key == "close_timeout" || key == "heartbeat_timeout") {
    // torch's keys without a meaning here: accepted so torchrun command lines work, but
    // checked as torch would (a number of seconds).
    absl::Duration unused;
    return duration(&unused);
  }
  if (std::optional<absl::Status> hang = ApplyHangRdzvConfKey(where, key, value, c)) return *hang;
  if (std::optional<absl::Status> torch = ApplyTorchRdzvConfKey(where, key, value, c)) {
    return *torch;
  }
  return std::nullopt;
}

// The value without one pair of quotes around all of it: PyTorch's launcher tests pass
// --rdzv-conf "'join_timeout=5,...'" (quotes a shell would have removed) and torchrun runs.
absl::string_view Unquoted(absl::string_view conf) {
  if (conf.size() >= 2 && (conf.front() == '\'' || conf.front() == '"') &&
      conf.back() == conf.front()) {
    return absl::StripAsciiWhitespace(conf.substr(1, conf.size() - 2));
  }
  return conf;
}

// torchrun's static form (see FinishStaticForm).
void ApplyStaticForm(Config* c) {
  c->static_rendezvous = true;
  c->rdzv_host_name = c->master_addr;
  c->rdzv_port = c->master_port;
  c->sources["rdzv-endpoint"] =
      absl::StrCat(c->SourceOf("master-addr"), ":", c->SourceOf("master-port"));
  if (c->node_rank >= 0 && c->sources.count("rdzv-host") == 0) {
    c->rdzv_hosting = c->node_rank == 0 ? RdzvHosting::kAlways : RdzvHosting::kNever;
    c->sources["rdzv-host"] = "--node-rank (static form: node rank 0 serves)";
  }
}

}  // namespace

absl::StatusOr<std::string> ResolveToken(const std::optional<FlagValue>& token_file,
                                         const std::map<std::string, std::string>& env) {
  if (!token_file) {
    auto it = env.find("MUSTER_TOKEN");
    if (it == env.end()) return std::string();
    RETURN_IF_ERROR(CheckToken("MUSTER_TOKEN", it->second));
    return it->second;
  }
  const auto& [path, where] = *token_file;
  std::ifstream in(path);
  if (!in) return FlagError(where, absl::StrCat("cannot read '", path, "': ", strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  std::string token(absl::StripTrailingAsciiWhitespace(text.str()));
  if (token.empty()) return FlagError(where, absl::StrCat("'", path, "' is empty"));
  RETURN_IF_ERROR(CheckToken(where, token));
  return token;
}

absl::StatusOr<std::string> ParseRunId(const FlagValue& value) {
  RETURN_IF_ERROR(CheckRunId(value.where, value.text));
  return value.text;
}

absl::Status ApplyRdzvEndpoint(const FlagValue& v, Config* c) {
  // Several members are for the etcd backend (checked in FinishRendezvousFlags, as
  // --rdzv-backend may come later); the first stands for all until then.
  c->rdzv_endpoint_text = v.text;
  std::string first(v.text.substr(0, v.text.find(',')));
  ASSIGN_OR_RETURN(Endpoint endpoint,
                   ParseEndpoint(v.where, first, c->rdzv_port, PortZero::kAnyFreePort));
  c->rdzv_host_name = endpoint.host;
  c->rdzv_port = endpoint.port;
  return absl::OkStatus();
}

// As torch's _parse_rendezvous_config: KEY=VALUE items separated by ',', blanks around
// keys and values ignored, an empty key or value an error. Keys nobody knows are ignored
// with one warning, as torchrun's backends ignore the keys they do not read.
absl::Status ApplyRdzvConf(const FlagValue& v, Config* c) {
  absl::string_view conf = Unquoted(absl::StripAsciiWhitespace(v.text));
  std::vector<std::string> unknown;
  std::vector<absl::string_view> items;
  if (!conf.empty()) items = absl::StrSplit(conf, ',');
  for (absl::string_view item : items) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::string key(absl::StripAsciiWhitespace(kv.first));
    std::string value(absl::StripAsciiWhitespace(kv.second));
    if (key.empty()) {
      return FlagError(v.where, absl::StrCat("'", EscapeForMessage(v.text),
                                             "' must be KEY=VALUE,...: an item has no key"));
    }
    if (value.empty()) {
      return FlagError(v.where, absl::StrCat(key, " has no value; write ", key, "=VALUE"));
    }
    std::optional<absl::Status> applied = ApplyRdzvConfItem(v.where, key, value, c);
    if (!applied) {
      unknown.push_back(absl::StrCat("'", EscapeForMessage(key), "'"));
    } else if (!applied->ok()) {
      return *applied;
    }
  }
  if (!unknown.empty()) {
    c->warnings.push_back(absl::StrCat(
        v.where, ": ignoring ", unknown.size() == 1 ? "key " : "keys ",
        absl::StrJoin(unknown, ", "),
        " (torchrun ignores keys its backend does not read); known: ", kKnownRdzvConfKeys));
  }
  return absl::OkStatus();
}

absl::Status ApplyRdzvHost(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->rdzv_hosting, ParseModeFlag<RdzvHosting>(v));
  return absl::OkStatus();
}

namespace {

// A node rank outside the node count (checked once both are known: the count may come from
// an operator's variables, after the flags).
absl::Status CheckNodeRankInRange(const Config& c) {
  if (c.node_rank < 0 || c.node_rank < c.max_nodes) return absl::OkStatus();
  return FlagError(
      c.SourceOf("node-rank"),
      absl::StrCat(c.node_rank, " is outside 0..", c.max_nodes - 1, " (", c.SourceOf("nnodes"),
                   " allows ", Plural(c.max_nodes, "node", "nodes"), ")"));
}

}  // namespace

absl::Status ApplyNodeRank(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->node_rank, ParseNonNegative(v.where, v.text));
  return absl::OkStatus();
}

absl::Status ApplyLocalAddr(const FlagValue& v, Config* c) {
  RETURN_IF_ERROR(CheckHostOrAddress(v.where, v.text));
  c->local_addr = v.text;
  return absl::OkStatus();
}

absl::Status ApplyTokenFile(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->token, ResolveToken(v, {}));
  c->sources["token"] = v.where;
  return absl::OkStatus();
}

absl::Status ApplyRdzvId(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->run_id, ParseRunId(v));
  return absl::OkStatus();
}

absl::Status ApplyRunId(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(std::string id, ParseRunId(v));
  if (c->sources.count("rdzv-id") == 0) c->run_id = id;
  return absl::OkStatus();
}

absl::Status FinishRendezvousFlags(const std::map<std::string, std::string>& env,
                                   const std::string& hostname, Config* c) {
  if (auto e = env.find("POD_IP");
      c->sources.count("local-addr") == 0 && e != env.end() && !e->second.empty()) {
    c->sources["local-addr"] = "POD_IP";
    RETURN_IF_ERROR(CheckHostOrAddress("POD_IP", e->second));
    c->local_addr = e->second;
  }
  if (c->sources.count("token-file") == 0) {
    ASSIGN_OR_RETURN(c->token, ResolveToken(std::nullopt, env));
    if (!c->token.empty()) c->sources["token"] = "MUSTER_TOKEN";
  }
  RETURN_IF_ERROR(ApplyOperatorConventions(env, hostname, c));
  RETURN_IF_ERROR(CheckNodeRankInRange(*c));
  if (c->tls_cert.empty() != c->tls_key.empty()) {
    return FlagError("--tls-cert/--tls-key", "give both or neither");
  }
  return absl::OkStatus();
}

// With node ranks given, node rank 0's agent serves the rendezvous at --rdzv-endpoint (when
// the endpoint names its host) and the others only join, also when they share that host:
// group rank 0 (node rank 0) serves the round's store, which shares the endpoint's port only
// in the agent that serves the rendezvous (docs/design.md §4.3 "Ports"). Had node rank 1 bound the
// port first, the store would land on a second port. --rdzv-host and is_host still decide.
void FinishNodeRankHosting(Config* c) {
  if (c->node_rank <= 0 || c->rdzv_host_name.empty() || c->rdzv_backend == rdzv::Backend::kEtcd ||
      c->rdzv_hosting != RdzvHosting::kAuto || c->sources.count("rdzv-host") != 0) {
    return;
  }
  c->rdzv_hosting = RdzvHosting::kNever;
  c->sources["rdzv-host"] =
      absl::StrCat(c->SourceOf("node-rank"), " ", c->node_rank, ": node rank 0 serves");
}

absl::Status FinishEtcdEndpoints(Config* c) {
  const std::string where = c->SourceOf("rdzv-endpoint");
  std::vector<std::string> items = absl::StrSplit(c->rdzv_endpoint_text, ',');
  if (c->rdzv_backend != rdzv::Backend::kEtcd) {
    if (items.size() <= 1) return absl::OkStatus();
    return FlagError(where,
                     "several endpoints are for --rdzv-backend etcd (its members); "
                     "muster's own rendezvous has one: give HOST:PORT");
  }
  if (c->rdzv_endpoint_text.empty()) {
    return FlagError("--rdzv-backend",
                     "etcd needs --rdzv-endpoint HOST:2379[,HOST:2379...] "
                     "(the etcd members)");
  }
  c->rdzv_endpoints.clear();
  for (const std::string& item : items) {
    ASSIGN_OR_RETURN(Endpoint e, ParseEndpoint(where, item, 2379));
    if (c->rdzv_endpoints.empty()) c->rdzv_port = e.port;
    c->rdzv_endpoints.push_back(std::move(e));
  }
  return absl::OkStatus();
}

absl::Status FinishAnyFreePort(Config* c) {
  const bool endpoint_zero = !c->rdzv_host_name.empty() && c->rdzv_port == 0;
  const bool master_zero = c->master_port_given && c->master_port == 0;
  if (!endpoint_zero && !master_zero) return absl::OkStatus();
  if (c->max_nodes > 1) {
    return FlagError(endpoint_zero ? c->SourceOf("rdzv-endpoint") : c->SourceOf("master-port"),
                     absl::StrCat("port 0 (any free port) works for a one-node job only, and ",
                                  c->SourceOf("nnodes"), " asks for ",
                                  c->min_nodes == c->max_nodes ? "" : "up to ", c->max_nodes,
                                  " nodes: the others could not learn which port this node "
                                  "picked; give a fixed port, e.g. ",
                                  endpoint_zero ? "HOST:29400" : "--master-port 29500"));
  }
  // One node: nobody else joins, so the rendezvous runs in this agent (as without
  // --rdzv-endpoint) and the store takes a free port (FixedStorePort, NeedsFreeMasterPort).
  if (endpoint_zero) c->rdzv_host_name.clear();
  return absl::OkStatus();
}

absl::Status FinishStaticForm(Config* c) {
  if (c->max_nodes <= 1 || !c->rdzv_host_name.empty()) return absl::OkStatus();
  // torchrun would take 127.0.0.1 and let every node serve a job of its own.
  if (c->sources.count("master-addr") == 0) {
    return FlagError(c->SourceOf("nnodes"),
                     absl::StrCat("a job of up to ", c->max_nodes,
                                  " nodes needs --rdzv-endpoint HOST[:PORT] (the node that "
                                  "hosts the rendezvous, or a `muster serve`) or torchrun's "
                                  "--master-addr HOST [--master-port PORT] (node rank 0)"));
  }
  if (c->store == StoreOwner::kRank0) {
    return FlagError(c->SourceOf("store"),
                     "rank0 makes worker rank 0 bind --master-port, which node rank 0's agent "
                     "serves the rendezvous on when there is no --rdzv-endpoint; give "
                     "--rdzv-endpoint HOST:PORT on another port, or leave --store at agent");
  }
  ApplyStaticForm(c);
  return absl::OkStatus();
}

void FinishBackend(Config* c) {
  // No endpoint is left (none given, or port 0 on one node): nobody else joins.
  if (c->rdzv_host_name.empty()) c->rdzv_backend = rdzv::Backend::kInProcess;
}

}  // namespace muster
