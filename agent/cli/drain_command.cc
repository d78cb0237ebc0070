// `muster drain`: preempt one node of a running job (docs/guides/preemption.md), as if its agent
// had received SIGTERM: every agent hears the notice first, every worker may checkpoint,
// then the node leaves (an elastic job goes on without it; a fixed-size one ends with 143).
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/cli/backends/rendezvous_backend.h"
#include "agent/cli/job_query.h"
#include "agent/cli/subcommands.h"
#include "agent/config/subcommand.h"
#include "base/exit_codes.h"
#include "rendezvous/core/types.h"

namespace muster {
namespace {

constexpr FlagSpec kDrainOwnFlags[] = {
    {.name = "rdzv-endpoint",
     .group = "Drain",
     .default_text = "required",
     .help = "HOST[:PORT] of the rendezvous server"},
    {.name = "rdzv-id", .group = "Drain", .default_text = "required", .help = "the job's run id"},
    {.name = "node",
     .group = "Drain",
     .default_text = "-",
     .help = "the node id to drain (`muster status` lists them); or --host"},
    {.name = "host",
     .group = "Drain",
     .default_text = "-",
     .help = "the host whose node to drain (one node per host)"},
    {.name = "reason",
     .group = "Drain",
     .default_text = "drained by muster drain",
     .help = "what the workers read in their MUSTER_PREEMPTED file"},
};
// --timeout, --token-file, --tls-ca: the same list `muster status` and `muster stacks` take.
constexpr auto kDrainFlags = WithJobQueryFlags(kDrainOwnFlags);

// The server's permanent refusals (no such job or node, between rounds), unlike 138's.
constexpr int kRefused = 1;

constexpr Subcommand kDrain = {
    .name = "drain",
    .usage =
        "Usage: muster drain --rdzv-endpoint H[:P] --rdzv-id ID (--node ID | --host H)\n"
        "       muster drain --rdzv-backend etcd --rdzv-endpoint H:2379[,...] --rdzv-id ID "
        "(--node ID | --host H)\n"
        "Preempt one node of a running job: every rank gets the preemption notice and may\n"
        "checkpoint, then the node leaves.\n",
    .flags = kDrainFlags,
    .epilogue =
        "Exit codes: 0 the notice was given, 1 the server refused it (no such job or "
        "node, or no round runs), 2 bad flags, 138 the server (with etcd: etcd, or the job's "
        "coordinator within --timeout) did not answer.\n",
};

// What a drain asked for: `node` or `host`, and the reason.
struct DrainTarget {
  std::string node;
  std::string host;
  std::string reason = "drained by muster drain";
  std::string Name() const { return node.empty() ? "host " + host : "node " + node; }
};

// The answer, as text and exit code.
int DrainOutcome(const absl::StatusOr<rdzv::NodeInfo>& drained, const DrainTarget& t,
                 const JobQuery& query) {
  const std::string& run_id = query.run_id();
  if (!drained.ok()) {
    std::fprintf(stderr, "muster drain: cannot drain %s of job %s %s: %s\n", t.Name().c_str(),
                 run_id.c_str(), query.From(QueryCommand::kDrain).c_str(),
                 std::string(drained.status().message()).c_str());
    const absl::StatusCode c = drained.status().code();
    return c == absl::StatusCode::kUnavailable || c == absl::StatusCode::kDeadlineExceeded
               ? exit_code::kTransient
               : kRefused;
  }
  std::printf("job %s: node %s (%s) is being preempted: %s\n", run_id.c_str(),
              drained->node_id.c_str(), drained->host.c_str(), t.reason.c_str());
  return 0;
}

}  // namespace

const Subcommand& DrainSubcommand() { return kDrain; }

int DrainCommand(const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env) {
  int code = exit_code::kSuccess;
  std::optional<FlagValues> values = StartSubcommand(kDrain, args, env, &code);
  if (!values) return code;
  std::optional<FlagValue> node = values->Get("node");
  std::optional<FlagValue> host = values->Get("host");
  if (node.has_value() == host.has_value() || (node && node->text.empty()) ||
      (host && host->text.empty())) {
    return UsageError(kDrain,
                      "--node/--host: give exactly one: the node id or the host to drain "
                      "(`muster status --rdzv-endpoint H:P --rdzv-id ID` lists both)");
  }
  DrainTarget target{.node = node ? node->text : "", .host = host ? host->text : ""};
  if (auto r = values->Get("reason"); r && !r->text.empty()) target.reason = r->text;
  absl::StatusOr<const RendezvousBackend*> backend = BackendFromFlags(*values);
  if (!backend.ok()) return UsageError(kDrain, backend.status().message());
  absl::StatusOr<std::unique_ptr<JobQuery>> query = (*backend)->Query(*values);
  if (!query.ok()) return UsageError(kDrain, query.status().message());
  if ((*query)->run_id().empty()) {
    return UsageError(kDrain,
                      "--rdzv-id: missing; give the job's run id (`muster status "
                      "--rdzv-endpoint H:P` lists the server's jobs)");
  }
  return DrainOutcome((*query)->Drain(target.node, target.host, target.reason), target, **query);
}

}  // namespace muster
