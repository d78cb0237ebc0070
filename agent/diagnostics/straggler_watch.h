// StragglerWatch: this node's part of naming stragglers (issue 30 item 4,
// docs/guides/hangs-and-stacks.md "Stragglers"), an agent component
// (agent/lifecycle/agent_component.h).
//
// While a round's workers run it takes every local rank's stack on a loop timer at every
// multiple of --straggler-interval on the wall clock (so that every node samples at the same
// moments; the job joins samples of the same tick; the `muster stacks` hook,
// agent/diagnostics/stack_collector.h; there is no event for "sample now"), reduces each to its
// main thread in one line and sends it to the job (RendezvousClient::ReportSample). The job judges
// every node's samples together (rendezvous/core/straggler.h) and tells every node when the rank
// named changes: this component logs it (a warning naming rank, node, host, share and stack; an
// info line when it clears), writes an event-log record "straggler" and adds it to --status-file.
// The metric (muster_straggler_rank) is set where the agent's metrics see the job's events
// (agent/cli/metered_parts.cc).
//
// Ownership: borrows the agent (AgentControl), which outlives it. Loop thread only; stack
// samples come back through EventLoop::Post.
#ifndef MUSTER_AGENT_STRAGGLER_WATCH_H_
#define MUSTER_AGENT_STRAGGLER_WATCH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "agent/config/config.h"
#include "agent/diagnostics/stack_collector.h"
#include "agent/lifecycle/agent_component.h"
#include "rendezvous/core/straggler.h"

namespace muster {

class StragglerWatch : public AgentComponent {
 public:
  struct Options {
    absl::Duration interval = absl::Seconds(1);
    int window = 30;  // job-wide samples
    double share = 0.4;
  };

  // The watch `config` asks for (--straggler-window, --straggler-interval, --straggler-share),
  // or null: off, debug mode, or --no-stack-hook (there is nothing to sample; a warning says
  // so).
  static std::unique_ptr<StragglerWatch> ForConfig(const Config& config);
  explicit StragglerWatch(Options options) : options_(options) {}
  ~StragglerWatch() override;

  absl::Status Start(AgentControl& agent) override;
  bool OnRendezvousEvent(const rdzv::Event& event) override;
  void Describe(PublishedState& state) const override;

  // The job-wide samples a window of `window` holds at one sample every `interval` (>= 2).
  static int WindowSamples(absl::Duration window, absl::Duration interval);

 private:
  void Arm();
  void Disarm();
  void OnTick();
  void OnStacks(int round, int64_t tick, std::vector<rdzv::RankStack> ranks);
  void OnVerdict(const rdzv::StragglerVerdict& verdict);

  const Options options_;
  AgentControl* agent_ = nullptr;
  std::unique_ptr<StackCollector> collector_;
  // Posted samples check it: the watch may be gone, or the round over, by then.
  std::shared_ptr<int> generation_ = std::make_shared<int>(0);
  int round_ = 0;  // the round whose workers are sampled; 0: none
  EventLoop::TimerId timer_ = 0;
  int64_t tick_ = 0;  // the wall clock's tick the timer is set for
  bool collecting_ = false;
  std::optional<rdzv::StragglerVerdict> named_;
};

}  // namespace muster

#endif  // MUSTER_AGENT_STRAGGLER_WATCH_H_
