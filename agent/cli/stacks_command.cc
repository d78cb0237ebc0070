// `muster stacks`: the Python stack of every rank on every node of a job, grouped by
// identical stack (docs/guides/hangs-and-stacks.md "Stacks").
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/cli/backends/rendezvous_backend.h"
#include "agent/cli/job_query.h"
#include "agent/cli/subcommands.h"
#include "agent/config/subcommand.h"
#include "agent/diagnostics/local_stacks.h"
#include "agent/diagnostics/stack_report.h"
#include "base/exit_codes.h"
#include "nlohmann/json.hpp"
#include "rendezvous/core/stacks.h"

namespace muster {
namespace {

constexpr FlagSpec kStacksOwnFlags[] = {
    {.name = "rdzv-endpoint",
     .group = "Stacks",
     .default_text = "this node's agents",
     .help = "HOST[:PORT] of the rendezvous server (with --rdzv-backend etcd: etcd's "
             "members): every node of the job; without it, the agents on this host answer "
             "for their own ranks (any rendezvous, --standalone too)"},
    {.name = "rdzv-id",
     .group = "Stacks",
     .default_text = "required with --rdzv-endpoint",
     .help = "the job's run id; without --rdzv-endpoint, needed only when this host runs "
             "agents of several jobs"},
    {.name = "json",
     .takes_value = false,
     .group = "Stacks",
     .default_text = "off",
     .help = "print JSON (every rank's raw dump and threads) instead of the grouped text"},
    {.name = "collect-timeout",
     .group = "Stacks",
     .default_text = "1500ms",
     .help = "how long the agents may take; ranks that have not answered by then are shown "
             "as not available"},
};
constexpr auto kStacksFlags = WithJobQueryFlags(kStacksOwnFlags);

// The server answered that it has no such job (a permanent answer, unlike 138's).
constexpr int kUnknownJob = 1;
// An agent on this host runs as another user, and this is not root (a permanent answer).
constexpr int kNotPermitted = exit_code::kUsage;

constexpr Subcommand kStacks = {
    .name = "stacks",
    .usage =
        "Usage: muster stacks --rdzv-endpoint H[:P] --rdzv-id ID [--json]\n"
        "       muster stacks --rdzv-backend etcd --rdzv-endpoint H:2379[,...] --rdzv-id ID\n"
        "       muster stacks [--rdzv-id ID] [--json]    (this host's agents only)\n"
        "The Python stack of every rank on every node, grouped by identical stack.\n",
    .flags = kStacksFlags,
    .epilogue =
        "Workers must be Python programs started by `muster run` (they get a "
        "sitecustomize hook), or py-spy must be on the agents' PATH "
        "(docs/guides/hangs-and-stacks.md).\n",
};

size_t RankCount(const std::vector<rdzv::NodeStacks>& nodes) {
  size_t n = 0;
  for (const rdzv::NodeStacks& node : nodes) n += node.ranks.size();
  return n;
}

// Prints `nodes` as --json or text; `where` names what answered.
int PrintStacks(const FlagValues& values, const std::string& run_id,
                const std::vector<rdzv::NodeStacks>& nodes, double took) {
  if (values.Get("json")) {
    nlohmann::json j = StacksJson(nodes);
    j["run_id"] = run_id;
    j["elapsed_s"] = took;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("job %s: %zu ranks on %zu nodes, stacks in %.2fs\n%s", run_id.c_str(),
              RankCount(nodes), nodes.size(), took, RenderStacks(nodes).c_str());
  return 0;
}

// Without --rdzv-endpoint: the agents of one job on this host (agent/diagnostics/local_stacks.h).
int LocalStacks(const FlagValues& values, absl::Duration collect) {
  std::vector<LocalAgent> agents = FindLocalAgents();
  if (auto id = values.Get("rdzv-id")) {
    std::erase_if(agents, [&](const LocalAgent& a) { return a.run_id != id->text; });
  }
  std::set<std::string> jobs;
  for (const LocalAgent& a : agents) jobs.insert(a.run_id);
  if (jobs.empty()) {
    std::fprintf(stderr,
                 "muster stacks: no muster agent%s runs on this host (in this network "
                 "namespace); for another node's job give --rdzv-endpoint H:P --rdzv-id ID\n",
                 values.Get("rdzv-id") ? " of that --rdzv-id" : "");
    return kUnknownJob;
  }
  if (jobs.size() > 1) {
    return UsageError(kStacks, absl::StrCat("--rdzv-id: this host runs agents of several jobs (",
                                            absl::StrJoin(jobs, ", "), "); give one"));
  }
  absl::Time started = absl::Now();
  std::vector<absl::StatusOr<rdzv::NodeStacks>> answers(agents.size());
  std::vector<std::thread> asks;  // every agent at once: as long as the slowest takes
  for (size_t i = 0; i < agents.size(); ++i) {
    asks.emplace_back([&, i] { answers[i] = AskLocalAgent(agents[i], collect); });
  }
  for (std::thread& t : asks) t.join();
  std::vector<rdzv::NodeStacks> nodes;
  std::vector<std::string> refused;  // agents of another user: an error, not "not available"
  for (size_t i = 0; i < agents.size(); ++i) {
    if (answers[i].ok()) {
      nodes.push_back(*std::move(answers[i]));
    } else if (absl::IsPermissionDenied(answers[i].status())) {
      refused.emplace_back(answers[i].status().message());
    } else {
      nodes.push_back({.node_id = absl::StrCat("pid ", agents[i].pid),
                       .unavailable = std::string(answers[i].status().message())});
    }
  }
  const double took = absl::ToDoubleSeconds(absl::Now() - started);
  if (!nodes.empty()) PrintStacks(values, *jobs.begin(), nodes, took);
  if (refused.empty()) return exit_code::kSuccess;
  for (const std::string& why : refused) std::fprintf(stderr, "muster stacks: %s\n", why.c_str());
  return kNotPermitted;
}

}  // namespace

const Subcommand& StacksSubcommand() { return kStacks; }

int StacksCommand(const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env) {
  int code = exit_code::kSuccess;
  std::optional<FlagValues> values = StartSubcommand(kStacks, args, env, &code);
  if (!values) return code;
  absl::Duration collect = absl::Milliseconds(1500);
  if (auto c = values->Get("collect-timeout")) {
    absl::StatusOr<absl::Duration> d = PositiveDuration(*c);
    if (!d.ok()) return UsageError(kStacks, d.status().message());
    collect = *d;
  }
  absl::StatusOr<const RendezvousBackend*> backend = BackendFromFlags(*values);
  if (!backend.ok()) return UsageError(kStacks, backend.status().message());
  if (!values->Get("rdzv-endpoint")) return LocalStacks(*values, collect);
  absl::StatusOr<std::unique_ptr<JobQuery>> query = (*backend)->Query(*values);
  if (!query.ok()) return UsageError(kStacks, query.status().message());
  if ((*query)->run_id().empty()) {
    return UsageError(kStacks,
                      "--rdzv-id: missing; give the job's run id (`muster status "
                      "--rdzv-endpoint H:P` lists the server's jobs)");
  }
  absl::Time started = absl::Now();
  absl::StatusOr<std::vector<rdzv::NodeStacks>> nodes = (*query)->Stacks(collect);
  double took = absl::ToDoubleSeconds(absl::Now() - started);
  if (!nodes.ok()) {
    std::fprintf(stderr, "muster stacks: cannot get the stacks of job %s %s: %s\n",
                 (*query)->run_id().c_str(), (*query)->From(QueryCommand::kStacks).c_str(),
                 std::string(nodes.status().message()).c_str());
    if (absl::IsUnimplemented(nodes.status())) {
      // An etcd endpoint without --rdzv-backend etcd: no server there relays the request.
      std::fprintf(stderr,
                   "muster stacks: the endpoint serves no muster rendezvous; for a job of "
                   "--rdzv-backend etcd, give --rdzv-backend etcd and etcd's members as "
                   "--rdzv-endpoint\n");
      return exit_code::kUsage;
    }
    return nodes.status().code() == absl::StatusCode::kNotFound ? kUnknownJob
                                                                : exit_code::kTransient;
  }
  return PrintStacks(*values, (*query)->run_id(), *nodes, took);
}

}  // namespace muster
