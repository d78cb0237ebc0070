#include "agent/diagnostics/straggler_watch.h"

#include <algorithm>
#include <utility>

#include "agent/diagnostics/stack_report.h"
#include "spdlog/spdlog.h"

namespace muster {

std::unique_ptr<StragglerWatch> StragglerWatch::ForConfig(const Config& config) {
  if (config.straggler_window <= absl::ZeroDuration() || config.debug) return nullptr;
  if (config.no_stack_hook) {
    spdlog::warn(
        "--straggler-window needs the stack hook: with --no-stack-hook no straggler "
        "is named");
    return nullptr;
  }
  return std::make_unique<StragglerWatch>(
      Options{.interval = config.straggler_interval,
              .window = WindowSamples(config.straggler_window, config.straggler_interval),
              .share = config.straggler_share});
}

int StragglerWatch::WindowSamples(absl::Duration window, absl::Duration interval) {
  return static_cast<int>(std::max<int64_t>(2, absl::IDivDuration(window, interval, &window)));
}

StragglerWatch::~StragglerWatch() {
  Disarm();
  collector_.reset();  // joins a sample in flight (bounded by the interval)
}

absl::Status StragglerWatch::Start(AgentControl& agent) {
  agent_ = &agent;
  collector_ = std::make_unique<StackCollector>(&agent.launcher(), StackCollector::Options{});
  return absl::OkStatus();
}

bool StragglerWatch::OnRendezvousEvent(const rdzv::Event& e) {
  switch (e.kind) {
    case rdzv::Event::Kind::kRoundStarted:  // a new round: a new tally
      Disarm();
      named_.reset();
      round_ = e.assignment.round;
      Arm();
      return false;
    case rdzv::Event::Kind::kStopWorkers:
    case rdzv::Event::Kind::kFinished:
      Disarm();
      return false;
    case rdzv::Event::Kind::kStraggler:
      OnVerdict(e.straggler);
      return true;
    default:
      return false;
  }
}

void StragglerWatch::Arm() {
  // The next multiple of the interval on the wall clock: every node samples at the same
  // moments, as close as their clocks agree (rendezvous/core/straggler.h).
  const absl::Time wall = absl::Now();
  absl::Duration rem;
  tick_ = absl::IDivDuration(wall - absl::UnixEpoch(), options_.interval, &rem) + 1;
  const absl::Duration delay = options_.interval - rem;
  timer_ = agent_->loop().AddTimer(EventLoop::Now() + delay, [this] {
    timer_ = 0;
    OnTick();
  });
}

void StragglerWatch::Disarm() {
  ++*generation_;  // a sample in flight is dropped
  collecting_ = false;
  if (timer_ != 0 && agent_ != nullptr) agent_->loop().CancelTimer(timer_);
  timer_ = 0;
  round_ = 0;
}

void StragglerWatch::OnTick() {
  const LifecyclePhase phase = agent_->phase();
  // The previous sample still out (a worker slow to dump): this tick is skipped, not queued.
  if (phase == LifecyclePhase::kRunning && !collecting_) {
    collecting_ = true;
    std::weak_ptr<int> generation = generation_;
    const int expected = *generation_;
    const int round = round_;
    const int64_t tick = tick_;
    collector_->Collect(options_.interval, [this, loop = &agent_->loop(), generation, expected,
                                            round, tick](std::vector<rdzv::RankStack> ranks) {
      loop->Post([this, generation, expected, round, tick, ranks = std::move(ranks)]() mutable {
        std::shared_ptr<int> alive = generation.lock();
        if (!alive || *alive != expected) return;  // gone, or the round is over
        OnStacks(round, tick, std::move(ranks));
      });
    });
  }
  // Past the running phase (the workers exited: clean-up, the exit barrier, a stop) this
  // round has nothing more to sample: no wake-ups until the next round's RoundStarted arms
  // again. Before it (the round's workers not yet started) the next tick samples them.
  if (phase == LifecyclePhase::kRunning || phase == LifecyclePhase::kRendezvous) Arm();
}

void StragglerWatch::OnStacks(int round, int64_t tick, std::vector<rdzv::RankStack> ranks) {
  collecting_ = false;
  rdzv::RendezvousClient* rdzv = agent_->rendezvous();
  if (rdzv == nullptr) return;
  rdzv->ReportSample(round, rdzv::StragglerSample{.tick = tick,
                                                  .window = options_.window,
                                                  .share = options_.share,
                                                  .ranks = MainThreadLines(ranks)});
}

void StragglerWatch::OnVerdict(const rdzv::StragglerVerdict& v) {
  if (v.rank >= 0) {
    spdlog::warn("straggler: {}", v.line);
    named_ = v;
  } else {
    spdlog::info("straggler: {}", v.line);
    named_.reset();
  }
  agent_->events().Write("straggler", {{"round", agent_->round()},
                                       {"rank", v.rank},
                                       {"node_id", v.node_id},
                                       {"host", v.host},
                                       {"share", v.share},
                                       {"samples", v.samples},
                                       {"stack", v.stack},
                                       {"line", v.line}});
  agent_->Publish();
}

void StragglerWatch::Describe(PublishedState& state) const {
  if (state.status == nullptr || !named_) return;
  (*state.status)["straggler"] = {{"rank", named_->rank},   {"node_id", named_->node_id},
                                  {"host", named_->host},   {"share", named_->share},
                                  {"stack", named_->stack}, {"line", named_->line}};
}

}  // namespace muster
