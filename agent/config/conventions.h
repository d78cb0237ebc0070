// Operator conventions (docs/design.md §4.8): what Kubernetes operators already put into a Pod's
// environment, read as node-level facts so that users change only their Pod's command to
// `muster run -- python train.py`.
//
//   Kubeflow PyTorchJob: PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE, PET_MASTER_ADDR,
//     PET_MASTER_PORT (the PET_* flags are read by the flag parser itself), and the
//     pod-level MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK.
//   Volcano (pytorch + env plugins), T9k PyTorchTrainingJob: MASTER_ADDR, MASTER_PORT,
//     WORLD_SIZE (pods), RANK (pod index), VC_TASK_INDEX.
//   Kubeflow Trainer v2 TrainJob (torch-distributed runtime, a JobSet): the same PET_*
//     variables (PET_NPROC_PER_NODE=auto on GPU nodes), no pod-level ones.
//   Indexed Job / JobSet: JOB_COMPLETION_INDEX (node rank).
//   LeaderWorkerSet: LWS_GROUP_SIZE (nodes: leader and workers), LWS_WORKER_INDEX (node
//     rank, 0 for the leader), LWS_LEADER_ADDRESS (the rendezvous host, default port).
//
// They only fill what flags, MUSTER_* and PET_* left unset (precedence: flag > MUSTER_* >
// conventions > default). The rendezvous endpoint becomes the master's address and port:
// the master Pod (rank 0) hosts the rendezvous there. Pod-level RANK and WORLD_SIZE are
// node rank and node count; they never reach workers as worker ranks.
//
// Whatever gave the endpoint (flag, MUSTER_*, convention): when it is this Pod's
// headless-Service name, <hostname>.<subdomain>[...], this Pod's agent hosts the
// rendezvous (unless --rdzv-host says otherwise).
#ifndef MUSTER_AGENT_CONVENTIONS_H_
#define MUSTER_AGENT_CONVENTIONS_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "agent/config/config.h"

namespace muster {

// Updates `config` (fields whose `config->sources` entry is absent) and sets
// config->convention to a one-line description for --dry-run ("" when none applies).
// `hostname` is this host's (HostInfo), "" when unknown.
absl::Status ApplyOperatorConventions(const std::map<std::string, std::string>& env,
                                      const std::string& hostname, Config* config);

}  // namespace muster

#endif  // MUSTER_AGENT_CONVENTIONS_H_
