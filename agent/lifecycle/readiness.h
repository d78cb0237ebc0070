// Readiness: what the agent's health service (--health-port) answers in each phase it
// publishes. Plain logic, no gRPC; the wiring feeds its answer to rdzv::HealthServer.
//
// Ready (the overall service "", which a Kubernetes `readinessProbe: grpc` checks) means
// "this agent is up and part of the job": from the start on the agent that serves the
// rendezvous, from its first completed rendezvous round on any other agent; it then stays
// ready through restarts until the agent exits. It never waits for the workers. Why:
// cluster DNS publishes a Pod's name under a headless Service only once the Pod is Ready
// (unless the Service sets publishNotReadyAddresses, which the Kubeflow training operator's
// do not). A readiness that waited for the workers would keep the rendezvous host's name
// unpublished, and the other agents need that name to start the workers: a deadlock.
// Ready here depends on nothing but the host itself, so no Service can deadlock.
//
// Workers running ("muster.v1.Workers") is the old readiness: SERVING exactly while the
// workers run. Not thread-safe; the agent's loop owns it.
#ifndef MUSTER_AGENT_READINESS_H_
#define MUSTER_AGENT_READINESS_H_

#include "base/agent_phase.h"

namespace muster {

class Readiness {
 public:
  struct Health {
    bool ready = false;
    bool workers_running = false;
  };

  explicit Readiness(bool hosts_rendezvous) : ready_(hosts_rendezvous) {}

  Health Next(AgentPhase phase);

 private:
  bool ready_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_READINESS_H_
