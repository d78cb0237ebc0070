// The rendezvous flags: where the job meets (--rdzv-endpoint, --rdzv-conf, --rdzv-host,
// --node-rank, --local-addr) and how it is secured (--token-file / MUSTER_TOKEN, TLS).
// `muster run` resolves all of them into Config through the apply steps below (entries of
// its flag table, run_flags.cc) and FinishRendezvousFlags; `muster serve` and `muster
// status` resolve their share (run id, endpoint, token) with the same functions, so a
// value means the same and fails with the same message in every command.
// Thread-safe (pure functions, apart from reading the token file).
#ifndef MUSTER_AGENT_RENDEZVOUS_FLAGS_H_
#define MUSTER_AGENT_RENDEZVOUS_FLAGS_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/config/config.h"
#include "agent/config/flag_table.h"

namespace muster {

// The rendezvous port when an endpoint names none (torchrun's too).
inline constexpr int kDefaultRendezvousPort = 29400;

// The job's shared secret: the contents of the file `token_file` names (trailing
// whitespace dropped; unreadable or empty is InvalidArgument naming where it came from),
// else MUSTER_TOKEN, else "". Never logged.
absl::StatusOr<std::string> ResolveToken(const std::optional<FlagValue>& token_file,
                                         const std::map<std::string, std::string>& env);

// --rdzv-id (and its alias --run-id): checked with CheckRunId (it travels in proto3
// strings and names a directory).
absl::StatusOr<std::string> ParseRunId(const FlagValue& value);

// Apply steps of `muster run`'s rendezvous flags (FlagSpec::apply). --node-rank is checked
// against --nnodes, which must be applied first.
absl::Status ApplyRdzvEndpoint(const FlagValue& value, Config* config);
absl::Status ApplyRdzvConf(const FlagValue& value, Config* config);
absl::Status ApplyRdzvHost(const FlagValue& value, Config* config);
absl::Status ApplyNodeRank(const FlagValue& value, Config* config);
absl::Status ApplyLocalAddr(const FlagValue& value, Config* config);
absl::Status ApplyTokenFile(const FlagValue& value, Config* config);
absl::Status ApplyRdzvId(const FlagValue& value, Config* config);
absl::Status ApplyRunId(const FlagValue& value, Config* config);  // loses to --rdzv-id

// After every rendezvous flag is applied: POD_IP and MUSTER_TOKEN where no flag gave them,
// the operator conventions (conventions.h; `hostname` is this host's), and the checks that
// span flags (TLS certificate and key together).
absl::Status FinishRendezvousFlags(const std::map<std::string, std::string>& env,
                                   const std::string& hostname, Config* config);

// After --master-addr/--master-port are applied: a multi-node job with no endpoint is
// torchrun's static form — the rendezvous at --master-addr:--master-port, served by node
// rank 0 (only there when node ranks are given), its store sharing the port, so workers
// see MASTER_PORT = --master-port. Without --master-addr either, InvalidArgument.
absl::Status FinishStaticForm(Config* config);
// Once --rdzv-backend is known: --rdzv-endpoint lists etcd's members H:P,H:P,... (port 2379
// by default) for etcd; the other backends take one endpoint.
absl::Status FinishEtcdEndpoints(Config* config);
// Once --rdzv-backend is known: with node ranks given, node rank 0's agent serves muster's
// own rendezvous and the others only join (etcd serves nothing, so it is left alone).
void FinishNodeRankHosting(Config* config);
// Port 0, torchrun's "any free port" (torchtitan's `--rdzv-endpoint localhost:0`, the form
// torchrun's --standalone uses; `--master-port 0`): on one node the rendezvous runs in this
// agent and the store takes a free port; with several nodes InvalidArgument, as the others
// could not learn the port. After FinishStaticForm.
absl::Status FinishAnyFreePort(Config* config);
// The one place that derives the backend from the flags (rendezvous/backend.h): kInProcess
// where no endpoint is left once the endpoint is final (one node, none given or port 0),
// otherwise what --rdzv-backend named (kGrpc by default, kEtcd). After FinishAnyFreePort.
void FinishBackend(Config* config);

}  // namespace muster

#endif  // MUSTER_AGENT_RENDEZVOUS_FLAGS_H_
