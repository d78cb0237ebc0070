// AgentParts: the collaborators an Agent works with, built by the wiring (agent/cli/wiring.h:
// the rendezvous client and, when this node hosts it, the gRPC server; the real worker
// launcher; the c10d store; the health service) or by a test (LocalRendezvous, a fake
// launcher). The Agent owns them once handed over. Plain data plus two small interfaces,
// so that agent.h names no transport.
#ifndef MUSTER_AGENT_AGENT_PARTS_H_
#define MUSTER_AGENT_AGENT_PARTS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/diagnostics/local_stacks.h"
#include "agent/diagnostics/stack_collector.h"
#include "base/agent_phase.h"
#include "base/event_loop.h"
#include "base/unique_fd.h"
#include "launch/worker_launcher.h"
#include "rendezvous/c10d/store_server.h"
#include "rendezvous/client.h"

namespace muster {

// Where the agent reports its phase for the kubelet (grpc.health.v1 on --health-port;
// agent/lifecycle/readiness.h says what the phases become).
class HealthReporter {
 public:
  virtual ~HealthReporter() = default;
  virtual void Report(AgentPhase phase) = 0;
};

// Where the agent reports each transition's phase (Prometheus metrics on --metrics-port:
// agent/cli/metered_parts.h).
class PhaseReporter {
 public:
  virtual ~PhaseReporter() = default;
  virtual void SetPhase(AgentPhase phase) = 0;
};

// The rendezvous server this agent hosts for the whole job. The agent keeps it until the
// other agents have heard the outcome.
class HostedRendezvous {
 public:
  virtual ~HostedRendezvous() = default;
  // Blocks until every agent but `except_node_id` has hung up, or `timeout`; false on
  // timeout.
  virtual bool WaitForAgentsToLeave(const std::string& except_node_id, absl::Duration timeout) = 0;
  // Flight recorder dumps of every node go under `dir` (docs/guides/collective-traces.md); `host`
  // names this machine in the locations every agent is told.
  virtual void KeepTracesIn(const std::string& /*dir*/, const std::string& /*host*/) {}
};

// A fresh c10d store (a new key space per round) at `port` (0: any free port), on the
// address the factory was made for (agent/config/listen_address.h).
using StoreFactory = std::function<absl::StatusOr<std::unique_ptr<c10d::StoreServer>>(int port)>;

struct AgentParts {
  // The loop everything runs on; the other parts may hold pointers to it.
  std::unique_ptr<EventLoop> loop;
  // A signalfd for the signals the agent handles plus SIGCHLD, blocked in every thread
  // (launch/signals.h: BlockAndOpenSignalFd, called before any thread or fork).
  UniqueFd signal_fd;
  std::unique_ptr<WorkerLauncher> launcher;
  std::unique_ptr<rdzv::RendezvousClient> rendezvous;
  std::unique_ptr<HostedRendezvous> hosted_rendezvous;  // null unless this node serves it
  // With --store agent; null when this agent never serves the store (it opens none).
  StoreFactory store_factory;
  // The numeric address the store (and a hosted rendezvous) listens on; advertised when
  // no flag names this node's address. Empty when no store is opened.
  std::string store_address;
  // This agent serves the rendezvous and its stores share that port (the factory ignores
  // the address and port it is given); it is then group rank 0 unless --node-rank says
  // otherwise, so that workers see MASTER_PORT = the endpoint's port.
  bool store_shares_rendezvous_port = false;
  std::unique_ptr<HealthReporter> health;  // null without --health-port
  std::unique_ptr<PhaseReporter> metrics;  // null without --metrics-port
  // `muster stacks`: the collector the rendezvous client and the local socket share, and
  // that socket (agent/diagnostics/local_stacks.h; null when it could not listen). Last: the socket
  // goes first, before the loop it is on and the launcher the collector reads.
  std::shared_ptr<StackCollector> stack_collector;
  std::unique_ptr<LocalStacksServer> local_stacks;
};

}  // namespace muster

#endif  // MUSTER_AGENT_AGENT_PARTS_H_
