#include "agent/config/conventions.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/volcano_hosts.h"
#include "base/status_macros.h"
#include "base/wire_values.h"

namespace muster {
namespace {

const std::string* Find(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

// Already validated as non-negative integers by the flag parser (kNumericNodeVars).
int Int(const std::string& s) {
  int v = 0;
  (void)absl::SimpleAtoi(s, &v);
  return v;
}

// Kubernetes names a Pod behind a headless Service <hostname>.<subdomain>[.<namespace>...]
// while the Pod's own hostname is only the first label (Indexed Job, JobSet, StatefulSet,
// the hostfiles built from those names). An endpoint of that form names this Pod: its
// agent serves the rendezvous, as it would for its bare hostname.
void HostWhenEndpointNamesThisPod(const std::string& host, Config* c) {
  if (c->rdzv_hosting != RdzvHosting::kAuto || c->sources.count("rdzv-host") ||
      c->rdzv_host_name.empty()) {
    return;
  }
  // No hostname: nothing to compare; the agent's own check (addresses) still applies.
  if (host.empty()) return;
  if (!absl::StartsWithIgnoreCase(c->rdzv_host_name, absl::StrCat(host, "."))) return;
  c->rdzv_hosting = RdzvHosting::kAlways;
  c->sources["rdzv-host"] =
      absl::StrCat("the endpoint ", c->rdzv_host_name, " names this Pod (hostname ", host, ")");
}

constexpr char kKubeflow[] = "Kubeflow PyTorchJob/TrainJob";
constexpr char kLeaderWorkerSet[] = "LeaderWorkerSet";

// Which operator's variables the environment holds, or "" for none.
std::string DetectConvention(const std::map<std::string, std::string>& env) {
  if (Find(env, "PET_NNODES") || Find(env, "PET_MASTER_ADDR")) return kKubeflow;
  if (Find(env, "LWS_LEADER_ADDRESS") || Find(env, "LWS_GROUP_SIZE")) return kLeaderWorkerSet;
  if (Find(env, "VC_TASK_INDEX") || Find(env, "VK_TASK_INDEX")) return "Volcano";
  for (const auto& [name, value] : env) {  // the svc plugin without the env plugin
    if (absl::StartsWith(name, "VC_") && absl::EndsWith(name, "_HOSTS")) return "Volcano";
  }
  if (Find(env, "JOB_COMPLETION_INDEX")) return "Indexed Job";
  if (Find(env, "MASTER_ADDR") && Find(env, "WORLD_SIZE") && Find(env, "RANK")) {
    return "MASTER_ADDR/WORLD_SIZE/RANK (T9k, Volcano pytorch plugin, Kubeflow)";
  }
  return "";
}

// What one convention sets, step by step; `used` collects the --dry-run description.
struct PodVariables {
  const std::map<std::string, std::string>& env;
  const std::string& name;
  const std::string& hostname;
  Config* c;
  std::vector<std::string> used;

  bool unset(const char* flag) const { return c->sources.count(flag) == 0; }

  // Node count: pod-level WORLD_SIZE counts pods (Kubeflow's PET_NNODES, when present, was
  // already taken by the flag parser and wins); a LeaderWorkerSet's group is one job, its
  // leader and workers the nodes (LWS_GROUP_SIZE counts both).
  absl::Status NodeCount() {
    const char* var = name == kLeaderWorkerSet ? "LWS_GROUP_SIZE" : "WORLD_SIZE";
    const std::string* ws = Find(env, var);
    if (!unset("nnodes") || ws == nullptr || name == kKubeflow) return absl::OkStatus();
    // WORLD_SIZE=0 would be a job of no nodes (found by tests/fuzz/flags_fuzz).
    if (Int(*ws) < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(var, ": '", *ws,
                       "' in the environment is not a node count (1 or more); fix or unset it"));
    }
    c->min_nodes = c->max_nodes = Int(*ws);
    c->sources["nnodes"] = var;
    used.push_back(absl::StrCat("nodes=", *ws, " (", var, ")"));
    return absl::OkStatus();
  }

  // Volcano without its pytorch plugin (no MASTER_ADDR): the svc plugin's task hosts are
  // the nodes, this Pod's place among them its node rank, the first serves (volcano_hosts.h).
  absl::Status VolcanoTaskHosts() {
    if (name != "Volcano" || Find(env, "MASTER_ADDR") != nullptr) return absl::OkStatus();
    std::vector<std::string> hosts = VolcanoHosts(env);
    if (hosts.empty()) return absl::OkStatus();
    const char* from = "Volcano's task hosts (VC_<TASK>_HOSTS, /etc/volcano/<task>.host)";
    if (unset("nnodes")) {
      c->min_nodes = c->max_nodes = static_cast<int>(hosts.size());
      c->sources["nnodes"] = from;
      used.push_back(absl::StrCat("nodes=", hosts.size(), " (task hosts)"));
    }
    if (unset("node-rank")) {
      int me = VolcanoNodeRank(hosts, hostname);
      if (me < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "this Pod's hostname '", hostname, "' is none of ", from, ": ",
            absl::StrJoin(hosts, ","), "; give --node-rank, or keep the Pod's hostname"));
      }
      c->node_rank = me;
      c->sources["node-rank"] = "this Pod's place in Volcano's task hosts";
      used.push_back(absl::StrCat("node rank=", me, " (", hosts[me], ")"));
    }
    if (unset("rdzv-endpoint") && c->max_nodes > 1) {
      RETURN_IF_ERROR(CheckHostOrAddress("VC_<TASK>_HOSTS", hosts[0]));
      c->rdzv_host_name = hosts[0];
      c->sources["rdzv-endpoint"] = "the first of Volcano's task hosts";
      used.push_back(absl::StrCat("rendezvous at ", hosts[0], ":", c->rdzv_port));
      if (c->node_rank >= 0 && unset("rdzv-host")) {
        c->rdzv_hosting = c->node_rank == 0 ? RdzvHosting::kAlways : RdzvHosting::kNever;
      }
    }
    return absl::OkStatus();
  }

  // Node rank: RANK is the pod's index; the task index, completion index and a
  // LeaderWorkerSet's worker index (0: the leader) likewise.
  void NodeRank() {
    if (!unset("node-rank")) return;
    for (const char* var :
         {"RANK", "VC_TASK_INDEX", "VK_TASK_INDEX", "JOB_COMPLETION_INDEX", "LWS_WORKER_INDEX"}) {
      if (const std::string* v = Find(env, var)) {
        c->node_rank = Int(*v);
        c->sources["node-rank"] = var;
        used.push_back(absl::StrCat("node rank=", *v, " (", var, ")"));
        return;
      }
    }
  }

  // Endpoint: the master Pod's address; its agent hosts the rendezvous on that port. A
  // LeaderWorkerSet names its leader (<lws>-<group>.<subdomain>.<namespace>) and no port:
  // the rendezvous is on --rdzv-endpoint's default port there.
  absl::Status Endpoint() {
    if (!unset("rdzv-endpoint") || c->max_nodes <= 1) return absl::OkStatus();
    bool kubeflow = Find(env, "PET_MASTER_ADDR") != nullptr;
    bool lws = name == kLeaderWorkerSet;
    const char* addr_var =
        kubeflow ? "PET_MASTER_ADDR" : (lws ? "LWS_LEADER_ADDRESS" : "MASTER_ADDR");
    const char* port_var = kubeflow ? "PET_MASTER_PORT" : (lws ? nullptr : "MASTER_PORT");
    const char* from = kubeflow ? "PET_MASTER_ADDR:PET_MASTER_PORT"
                                : (lws ? "LWS_LEADER_ADDRESS" : "MASTER_ADDR:MASTER_PORT");
    const std::string* addr = Find(env, addr_var);
    const std::string* port = port_var == nullptr ? nullptr : Find(env, port_var);
    if (addr == nullptr) return absl::OkStatus();
    // A name with a port, blanks or non-ASCII bytes in it would only fail later, as a
    // rendezvous that never resolves.
    RETURN_IF_ERROR(CheckHostOrAddress(addr_var, *addr));
    c->rdzv_host_name = *addr;
    if (port != nullptr) {
      // Only checked as a non-negative number elsewhere: 0 or 70000 is no endpoint (found
      // by tests/fuzz/flags_fuzz).
      if (Int(*port) < 1 || Int(*port) > 65535) {
        return absl::InvalidArgumentError(
            absl::StrCat(port_var, ": '", *port, "' in the environment is not a port (1..65535)"));
      }
      c->rdzv_port = Int(*port);
    }
    c->sources["rdzv-endpoint"] = from;
    used.push_back(absl::StrCat("rendezvous at ", *addr, ":", c->rdzv_port, " (", from, ")"));
    // The master Pod knows itself by rank 0 even when its hostname differs from the
    // service name in MASTER_ADDR; another rank never tries to serve, also when it shares
    // the host (agents started by hand with the operator's variables): had it bound the port
    // first, rank 0 would fail to serve.
    if (c->node_rank >= 0 && unset("rdzv-host")) {
      c->rdzv_hosting = c->node_rank == 0 ? RdzvHosting::kAlways : RdzvHosting::kNever;
    }
    return absl::OkStatus();
  }

  absl::Status RankInRange() {
    if (c->node_rank < c->max_nodes || c->max_nodes <= 0 || c->node_rank < 0) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        c->sources["node-rank"], ": node rank ", c->node_rank, " is outside 0..", c->max_nodes - 1,
        " (", c->SourceOf("nnodes"), " says ", c->max_nodes, " nodes)"));
  }
};

// The variables operators put into a Pod's environment (see the header).
absl::Status ApplyPodVariables(const std::map<std::string, std::string>& env,
                               const std::string& hostname, Config* c) {
  std::string name = DetectConvention(env);
  if (name.empty()) return absl::OkStatus();
  PodVariables pod{.env = env, .name = name, .hostname = hostname, .c = c};
  RETURN_IF_ERROR(pod.NodeCount());
  RETURN_IF_ERROR(pod.VolcanoTaskHosts());
  pod.NodeRank();
  RETURN_IF_ERROR(pod.Endpoint());
  RETURN_IF_ERROR(pod.RankInRange());
  c->convention = absl::StrCat(name, pod.used.empty() ? "" : ": ", absl::StrJoin(pod.used, ", "));
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyOperatorConventions(const std::map<std::string, std::string>& env,
                                      const std::string& hostname, Config* c) {
  RETURN_IF_ERROR(ApplyPodVariables(env, hostname, c));
  HostWhenEndpointNamesThisPod(hostname, c);
  return absl::OkStatus();
}

}  // namespace muster
