// HangWatch: this node's part of hang detection (issue 17 item 2, docs/guides/hangs-and-stacks.md
// "Hangs").
//
// While a round's workers run it samples the CPU time of each worker's process tree
// (agent/diagnostics/process_cpu.h) on a loop timer every hang_timeout/4: there is no event for "no
// progress". A worker progresses when its tree used more than a small threshold since the
// last sample. Once no worker has progressed for half the timeout it samples every rank's
// stack (agent/diagnostics/stack_collector.h), and again once the timeout has passed; when both
// samples show the same main-thread stack for every rank it reports the node stalled to the job
// (RendezvousClient::ReportStalled), and progressing again when CPU moves. The job declares
// the hang once every node is stalled (rendezvous/core/hang.h).
//
// When the job stops or ends the round because of a hang it writes hang-round<N>.txt into
// the run directory: the culprit line, the job's grouping when known, and this node's ranks'
// full stacks; and an event-log record "hang_detected".
//
// Ownership: borrows the loop, launcher, rendezvous client and event log, which outlive it.
// Loop thread only; stack samples come back through EventLoop::Post.
#ifndef MUSTER_AGENT_HANG_WATCH_H_
#define MUSTER_AGENT_HANG_WATCH_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/config/config.h"
#include "agent/config/run_plan.h"
#include "agent/diagnostics/stack_collector.h"
#include "agent/lifecycle/event_log.h"
#include "base/event_loop.h"
#include "launch/worker_launcher.h"
#include "rendezvous/client.h"

namespace muster {

class HangWatch {
 public:
  struct Options {
    absl::Duration timeout;
    bool restartable = true;         // --hang-action restart
    std::string run_dir;             // where hang-round<N>.txt goes
    StackCollector::Options stacks;  // --no-stack-hook, py-spy: as `muster stacks` reads
  };

  HangWatch(Options options, EventLoop* loop, const WorkerLauncher* launcher,
            rdzv::RendezvousClient* rdzv, EventLog* events);
  // The watch `config` asks for (--hang-timeout, --hang-action; a hang restarts under every
  // restart policy but Never), or null: off, or debug mode. py-spy is looked for on the
  // workers' PATH (WorkerPlan::env_base).
  static std::unique_ptr<HangWatch> ForConfig(const Config& config, const WorkerPlan& workers,
                                              const std::string& run_dir, EventLoop* loop,
                                              const WorkerLauncher* launcher,
                                              rdzv::RendezvousClient* rdzv, EventLog* events);
  ~HangWatch();

  // The workers of `round` started: watching begins.
  void Start(int round);
  // The workers are being stopped: watching ends until the next Start.
  void Stop();
  // Every event from the job: a stop or an outcome caused by a hang writes the hang file.
  void OnJobEvent(const rdzv::Event& event);

  // Below this much CPU time between two samples a worker has made no progress.
  static absl::Duration Threshold(absl::Duration interval);

 private:
  struct Sample {
    std::vector<rdzv::RankStack> full;     // faulthandler's text per rank
    std::vector<rdzv::RankStack> summary;  // the main thread in one line
  };

  void Arm();
  void OnTick();
  // Updates last_progress_ from the workers' CPU time; returns the running workers' count.
  int SampleCpu(absl::Time now);
  void CollectStacks();
  void OnStacks(std::vector<rdzv::RankStack> ranks);
  void SetStalled(bool stalled);
  void WriteHangFile(const rdzv::Failure& failure);

  const Options options_;
  EventLoop* const loop_;
  const WorkerLauncher* const launcher_;
  rdzv::RendezvousClient* const rdzv_;
  EventLog* const events_;
  std::unique_ptr<StackCollector> collector_;
  // Posted stack samples check it: the watch may be gone, or restarted, by then.
  std::shared_ptr<int> generation_ = std::make_shared<int>(0);

  bool watching_ = false;
  int round_ = 0;
  EventLoop::TimerId timer_ = 0;
  std::map<pid_t, absl::Duration> cpu_;  // each worker's tree's CPU time at the last sample
  absl::Time last_progress_;             // the last time any worker's CPU time moved
  bool collecting_ = false;
  std::optional<Sample> first_;    // taken after timeout/2 without progress
  std::optional<Sample> stalled_;  // the confirming sample once reported stalled
  int written_round_ = -1;         // the round whose hang file is written
};

}  // namespace muster

#endif  // MUSTER_AGENT_HANG_WATCH_H_
