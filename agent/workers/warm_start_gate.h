// WarmStartGate: the first attempt's workers start once the warm template has imported its
// modules, waited for as an event of the agent's loop (docs/design.md §4.5a).
//
// With --warm-start the template imports while the rendezvous forms. A round that forms
// before it is ready is held here (with every event of the job that follows it, in order),
// not started: WarmSource::Start would have to block the loop for the import (seconds, tens
// of seconds from a shared filesystem), and a SIGTERM, a dead supervisor or the job's own
// word would wait for it. The gate watches the template's socket (its "ready", or EOF when
// an import failed) and a timer at the import deadline; either hands the held events back to
// the agent, whose workers are then forked, or exec'd where the template failed or overran.
// A signal meanwhile is the agent's as always: it leaves the job and exits without starting
// anything. Loop thread only.
#ifndef MUSTER_AGENT_WORKERS_WARM_START_GATE_H_
#define MUSTER_AGENT_WORKERS_WARM_START_GATE_H_

#include <vector>

#include "agent/lifecycle/agent_component.h"
#include "base/event_loop.h"
#include "launch/warm_source.h"

namespace muster {

class WarmStartGate : public AgentComponent {
 public:
  // `source` is the agent's (its WorkerGroup's) and outlives the gate.
  explicit WarmStartGate(WarmSource& source) : source_(source) {}
  ~WarmStartGate() override;

  absl::Status Start(AgentControl& agent) override;
  bool OnRendezvousEvent(const rdzv::Event& event) override;

 private:
  // The template answered, exited or overran: the held events go to the agent.
  void Open();
  void StopWatching();

  WarmSource& source_;
  AgentControl* agent_ = nullptr;
  int watched_fd_ = -1;
  EventLoop::TimerId deadline_timer_ = 0;
  bool open_ = false;
  std::vector<rdzv::Event> held_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_WORKERS_WARM_START_GATE_H_
