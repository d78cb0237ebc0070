#include "rendezvous/core/join_checks.h"

#include "absl/strings/str_cat.h"

namespace muster::rdzv {

std::string DescribeNode(const NodeInfo& n) {
  return absl::StrCat(n.host, " (", n.address, ", node ", n.node_id, ")");
}

absl::Status CheckJobSpec(const JobSpec& spec, const NodeInfo& who) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("node ", DescribeNode(who), ": ", what));
  };
  if (spec.min_nodes < 1 || spec.max_nodes < spec.min_nodes) {
    return bad(
        absl::StrCat("--nnodes ", spec.min_nodes, ":", spec.max_nodes, " needs 1 <= MIN <= MAX"));
  }
  if (spec.max_restarts < 0) return bad(absl::StrCat("--max-restarts ", spec.max_restarts, " < 0"));
  if (spec.spares < 0) return bad(absl::StrCat("--spares ", spec.spares, " < 0"));
  if (spec.heartbeat_interval <= absl::ZeroDuration() || spec.heartbeat_misses < 1) {
    return bad("heartbeat_interval and heartbeat_misses must be positive (--rdzv-conf)");
  }
  if (spec.join_timeout < absl::ZeroDuration() || spec.last_call_timeout < absl::ZeroDuration() ||
      spec.stop_timeout < absl::ZeroDuration()) {
    return bad("negative join, last-call or stop timeout (--rdzv-conf)");
  }
  if (spec.quarantine_after < 0) {
    return bad(absl::StrCat("--quarantine-after ", spec.quarantine_after, " < 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckSameJobSpec(const JobSpec& job, const JobSpec& node, const NodeInfo& who) {
  auto differs = [&](const char* flag, const std::string& theirs, const std::string& ours) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", theirs, " of node ", DescribeNode(who), " differs from the job's ",
                     ours, "; every node must be started with the same"));
  };
  if (node.run_id != job.run_id) return differs("--rdzv-id", node.run_id, job.run_id);
  if (node.min_nodes != job.min_nodes || node.max_nodes != job.max_nodes) {
    return differs("--nnodes", absl::StrCat(node.min_nodes, ":", node.max_nodes),
                   absl::StrCat(job.min_nodes, ":", job.max_nodes));
  }
  if (node.max_restarts != job.max_restarts) {
    return differs("--max-restarts", std::to_string(node.max_restarts),
                   std::to_string(job.max_restarts));
  }
  if (node.spares != job.spares) {
    return differs("--spares", std::to_string(node.spares), std::to_string(job.spares));
  }
  if (node.restart_after_success != job.restart_after_success) {
    return differs("--restart-policy", node.restart_after_success ? "Always" : "not Always",
                   job.restart_after_success ? "Always" : "not Always");
  }
  if (node.quarantine_after != job.quarantine_after) {
    return differs("--quarantine-after", std::to_string(node.quarantine_after),
                   std::to_string(job.quarantine_after));
  }
  return absl::OkStatus();
}

absl::Status CheckNodeFits(const NodeInfo& node, const JobSpec& job) {
  if (node.local_world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("node ", DescribeNode(node),
                                                   " has no workers (local_world_size ",
                                                   node.local_world_size, ")"));
  }
  if (node.local_world_size > kMaxLocalWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", DescribeNode(node), " brings ", node.local_world_size,
                     " workers; at most ", kMaxLocalWorldSize, " per node (--nproc-per-node)"));
  }
  if (node.rank_hint >= job.max_nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("node rank ", node.rank_hint, " of ", DescribeNode(node), " is outside 0..",
                     job.max_nodes - 1, " (--nnodes allows at most ", job.max_nodes, " nodes)"));
  }
  return absl::OkStatus();
}

}  // namespace muster::rdzv
