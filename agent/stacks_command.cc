// `muster stacks`: the Python stack of every rank on every node of a job, grouped by
// identical stack (README "Stacks").
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/job_query.h"
#include "agent/stack_report.h"
#include "agent/subcommand.h"
#include "agent/subcommands.h"
#include "base/exit_codes.h"
#include "nlohmann/json.hpp"
#include "rendezvous/grpc/stacks_client.h"

namespace muster {
namespace {

constexpr FlagSpec kStacksFlags[] = {
    {.name = "rdzv-endpoint",
     .group = "Stacks",
     .default_text = "required",
     .help = "HOST[:PORT] of the rendezvous server"},
    {.name = "rdzv-id", .group = "Stacks", .default_text = "required", .help = "the job's run id"},
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
    {.name = "token-file",
     .group = "Security",
     .default_text = "MUSTER_TOKEN",
     .help = "file with the shared secret"},
    {.name = "tls-ca",
     .group = "Security",
     .default_text = "none",
     .help = "PEM CA of the server's certificate"},
    {.name = "timeout",
     .group = "Stacks",
     .default_text = "10s",
     .help = "wait up to this long for a server still starting; without it a refused "
             "connection fails at once"},
};

// The server answered that it has no such job (a permanent answer, unlike 138's).
constexpr int kUnknownJob = 1;

constexpr Subcommand kStacks = {
    .name = "stacks",
    .usage =
        "Usage: muster stacks --rdzv-endpoint H[:P] --rdzv-id ID [--json]\n"
        "The Python stack of every rank on every node, grouped by identical stack.\n",
    .flags = kStacksFlags,
    .epilogue =
        "Workers must be Python programs started by `muster run` (they get a "
        "sitecustomize hook; README \"Stacks\").\n",
};

size_t RankCount(const std::vector<rdzv::NodeStacks>& nodes) {
  size_t n = 0;
  for (const rdzv::NodeStacks& node : nodes) n += node.ranks.size();
  return n;
}

}  // namespace

int StacksCommand(const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env) {
  int code = exit_code::kSuccess;
  std::optional<FlagValues> values = StartSubcommand(kStacks, args, env, &code);
  if (!values) return code;
  absl::StatusOr<rdzv::JobStatusQuery> query = JobQueryFromFlags(*values);
  if (!query.ok()) return UsageError(kStacks, query.status().message());
  if (query->run_id.empty()) {
    return UsageError(kStacks,
                      "--rdzv-id: missing; give the job's run id (`muster status "
                      "--rdzv-endpoint H:P` lists the server's jobs)");
  }
  absl::Duration collect = absl::Milliseconds(1500);
  if (auto c = values->Get("collect-timeout")) {
    absl::StatusOr<absl::Duration> d = PositiveDuration(*c);
    if (!d.ok()) return UsageError(kStacks, d.status().message());
    collect = *d;
  }
  absl::Time started = absl::Now();
  absl::StatusOr<std::vector<rdzv::NodeStacks>> nodes = rdzv::GetStacks(*query, collect);
  double took = absl::ToDoubleSeconds(absl::Now() - started);
  if (!nodes.ok()) {
    std::fprintf(stderr, "muster stacks: cannot get the stacks of job %s from %s: %s\n",
                 query->run_id.c_str(), query->endpoint.c_str(),
                 std::string(nodes.status().message()).c_str());
    return nodes.status().code() == absl::StatusCode::kNotFound ? kUnknownJob
                                                                : exit_code::kTransient;
  }
  if (values->Get("json")) {
    nlohmann::json j = StacksJson(*nodes);
    j["run_id"] = query->run_id;
    j["elapsed_s"] = took;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("job %s: %zu ranks on %zu nodes, stacks in %.2fs\n%s", query->run_id.c_str(),
              RankCount(*nodes), nodes->size(), took, RenderStacks(*nodes).c_str());
  return 0;
}

}  // namespace muster
