// TraceCollection: the agent's part of collecting flight recorder dumps (issue 17 item 3,
// docs/guides/collective-traces.md), a component of the agent
// (agent/lifecycle/agent_component.h).
//
// Once the workers of a round that did not succeed have stopped (torch writes its dumps at
// the timeout or abort, before the worker exits), it sends the dump files of that attempt to
// the job, which stores every node's in one place: the log dir of the process serving the
// rendezvous (`hosted`, told where at Start). Before the agent exits after a failed job it
// holds the finish at most kTracesWait for the job to say where every node's dumps are, and
// names that place in the agent's last line; restarts never wait.
#ifndef MUSTER_AGENT_DIAGNOSTICS_TRACE_COLLECTION_H_
#define MUSTER_AGENT_DIAGNOSTICS_TRACE_COLLECTION_H_

#include <string>

#include "agent/lifecycle/agent_component.h"
#include "agent/lifecycle/agent_parts.h"

namespace muster {

class TraceCollection : public AgentComponent {
 public:
  // `hosted`: the rendezvous this agent serves, or null; it must outlive Start().
  explicit TraceCollection(HostedRendezvous* hosted) : hosted_(hosted) {}

  absl::Status Start(AgentControl& agent) override;
  bool OnRendezvousEvent(const rdzv::Event& event) override;
  void OnRoundStopped() override { Upload(/*even_without_files=*/false); }
  bool HoldFinish() override;

 private:
  // After the workers of a round that did not succeed stopped: sends their dump files (or,
  // with `even_without_files`, that there are none). Once per round.
  void Upload(bool even_without_files);
  void EndWait(bool finish);
  void OnStored(const rdzv::TracesSummary& t);

  HostedRendezvous* hosted_;
  AgentControl* agent_ = nullptr;
  int round_ = 0;          // the round whose dumps were sent
  bool sent_ = false;      // the backend takes them (the job answers)
  bool complete_ = false;  // every node of the round still connected has answered
  bool over_ = false;      // the exit no longer waits
  EventLoop::TimerId timer_ = 0;
  std::string line_;  // "flight recorder traces of 2 nodes (4 files) in HOST:DIR/"
};

}  // namespace muster

#endif  // MUSTER_AGENT_DIAGNOSTICS_TRACE_COLLECTION_H_
