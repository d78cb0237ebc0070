// Preemption: the agent's part of a preemption (issue 17 item 4, docs/guides/preemption.md),
// a component of the agent (agent/lifecycle/agent_component.h).
//
// SIGTERM, a --preempt-file notice or `muster drain` make the job tell every agent before
// anything is stopped; each agent hands the notice to its workers
// (agent/preempt/preempt_notice.h) and waits up to --preempt-grace for them to exit on their
// own. Meanwhile their exits are taken (no restart decision) and the job's kStopWorkers and
// kFinished are held back, then handed to the agent once the wait ends. The preempted node
// then leaves and exits 143; the others stop what is left and wait for the job's word (a
// next round without the preempted node, or the end). What the agent publishes says
// "Preempting" from the notice until that word.
#ifndef MUSTER_AGENT_PREEMPT_PREEMPTION_H_
#define MUSTER_AGENT_PREEMPT_PREEMPTION_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "agent/lifecycle/agent_component.h"
#include "agent/preempt/preempt_file_watch.h"

namespace muster {

class Preemption : public AgentComponent {
 public:
  absl::Status Start(AgentControl& agent) override;
  bool OnSignal(int sig, bool first) override;
  bool OnWorkerExit(const WorkerExit& exit) override;
  bool OnRendezvousEvent(const rdzv::Event& event) override;
  void Describe(PublishedState& state) const override;

 private:
  // The last notice's.
  struct Notice {
    int round = 0;        // the round it concerns
    bool self = false;    // this node is the one preempted: it leaves and exits 143
    bool waiting = true;  // the workers have the notice; the grace runs
    std::string host;     // the preempted node's
    std::string reason;
    absl::Time started;
    EventLoop::TimerId grace_timer = 0;
    EventLoop::TimerId kill_timer = 0;  // self: SIGKILL at started + --shutdown-timeout
    std::optional<rdzv::Event> held;    // kStopWorkers / kFinished, handed back once done
  };

  // The workers of the current round have the notice and the grace runs.
  bool Waiting() const;
  void OnPreemptFile(const std::string& reason);
  // SIGTERM or --preempt-file: tells the job, then the workers. False when no round's
  // workers run here (the caller stops as before).
  bool PreemptSelf(const std::string& reason);
  void OnNotice(const rdzv::Event& e);
  void Begin(bool self, const std::string& host, const std::string& reason);
  void EndWait(const std::string& why);

  AgentControl* agent_ = nullptr;
  std::unique_ptr<PreemptFileWatch> file_watch_;  // --preempt-file
  std::optional<Notice> notice_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_PREEMPT_PREEMPTION_H_
