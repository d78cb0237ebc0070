#include "agent/diagnostics/hang_watch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/diagnostics/process_cpu.h"
#include "agent/diagnostics/py_spy.h"
#include "agent/diagnostics/stack_report.h"
#include "agent/lifecycle/status_file.h"
#include "base/duration.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// How long a stack sample may take (StackCollector's deadline).
constexpr absl::Duration kStacksTimeout = absl::Seconds(2);

bool SameStacks(const std::vector<rdzv::RankStack>& a, const std::vector<rdzv::RankStack>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const rdzv::RankStack& x, const rdzv::RankStack& y) {
                      return x.rank == y.rank && x.pid == y.pid && x.text == y.text &&
                             x.unavailable == y.unavailable;
                    });
}

}  // namespace

HangWatch::HangWatch(Options options, EventLoop* loop, const WorkerLauncher* launcher,
                     rdzv::RendezvousClient* rdzv, EventLog* events)
    : options_(std::move(options)),
      loop_(loop),
      launcher_(launcher),
      rdzv_(rdzv),
      events_(events),
      collector_(std::make_unique<StackCollector>(launcher, options_.stacks)) {}

std::unique_ptr<HangWatch> HangWatch::ForConfig(const Config& config, const WorkerPlan& workers,
                                                const std::string& run_dir, EventLoop* loop,
                                                const WorkerLauncher* launcher,
                                                rdzv::RendezvousClient* rdzv, EventLog* events) {
  if (config.hang_timeout <= absl::ZeroDuration() || config.debug) return nullptr;
  Options options{
      .timeout = config.hang_timeout,
      .restartable = config.hang_restart && config.restart_policy != RestartPolicy::kNever,
      .run_dir = run_dir};
  auto path = workers.env_base.find("PATH");
  options.stacks = {.hook = !config.no_stack_hook,
                    .py_spy = FindPySpy(path != workers.env_base.end() ? path->second : "")};
  return std::make_unique<HangWatch>(std::move(options), loop, launcher, rdzv, events);
}

HangWatch::~HangWatch() {
  Stop();
  collector_.reset();  // joins a sample in flight (bounded by kStacksTimeout)
}

absl::Duration HangWatch::Threshold(absl::Duration interval) {
  // /proc counts in 10 ms ticks and a stack dump costs a worker about a millisecond; a rank
  // waiting in gloo used 0-2 ticks in 6 s. Low, so that a busy worker starved of CPU by a
  // loaded machine (a 2.5 % share) still counts as progress.
  return std::max(absl::Milliseconds(20), interval / 40);
}

void HangWatch::Start(int round) {
  Stop();
  round_ = round;
  watching_ = true;
  cpu_.clear();
  stalled_.reset();
  last_progress_ = EventLoop::Now();
  Arm();
}

void HangWatch::Stop() {
  watching_ = false;
  ++*generation_;  // a sample in flight is dropped
  collecting_ = false;
  first_.reset();
  if (timer_ != 0) loop_->CancelTimer(timer_);
  timer_ = 0;
}

void HangWatch::Arm() {
  timer_ = loop_->AddTimer(EventLoop::Now() + options_.timeout / 4, [this] {
    timer_ = 0;
    OnTick();
  });
}

int HangWatch::SampleCpu(absl::Time now) {
  std::vector<pid_t> pids;
  for (const WorkerView& w : launcher_->Workers()) {
    if (w.pid > 0 && !w.status) pids.push_back(w.pid);
  }
  std::map<pid_t, absl::Duration> cpu = ProcessTreeCpu(pids);
  const absl::Duration threshold = Threshold(options_.timeout / 4);
  bool progressed = false;
  for (const auto& [pid, used] : cpu) {
    auto before = cpu_.find(pid);
    if (before == cpu_.end() || used - before->second > threshold) progressed = true;
  }
  cpu_ = std::move(cpu);
  if (progressed) {
    last_progress_ = now;
    first_.reset();
    if (collecting_) ++*generation_;  // that sample belongs to a stall that ended
    collecting_ = false;
    if (stalled_) {
      stalled_.reset();
      SetStalled(false);
    }
  }
  return static_cast<int>(cpu_.size());
}

void HangWatch::OnTick() {
  if (!watching_) return;
  const absl::Time now = EventLoop::Now();
  if (SampleCpu(now) == 0) return;  // every worker ended: the round ends without us
  const absl::Duration idle = now - last_progress_;
  if (!collecting_ && !stalled_ &&
      ((!first_ && idle >= options_.timeout / 2) || (first_ && idle >= options_.timeout))) {
    CollectStacks();
  }
  Arm();
}

void HangWatch::CollectStacks() {
  collecting_ = true;
  std::weak_ptr<int> generation = generation_;
  const int expected = *generation_;
  collector_->Collect(kStacksTimeout, [this, loop = loop_, generation,
                                       expected](std::vector<rdzv::RankStack> ranks) {
    loop->Post([this, generation, expected, ranks = std::move(ranks)]() mutable {
      std::shared_ptr<int> alive = generation.lock();
      if (!alive || *alive != expected) return;  // gone, stopped, or progress since
      OnStacks(std::move(ranks));
    });
  });
}

void HangWatch::OnStacks(std::vector<rdzv::RankStack> ranks) {
  collecting_ = false;
  Sample s{.full = std::move(ranks)};
  s.summary = MainThreadLines(s.full);
  if (!first_ || EventLoop::Now() - last_progress_ < options_.timeout ||
      !SameStacks(first_->summary, s.summary)) {
    first_ = std::move(s);  // the first sample, or one that moved: compare with the next
    return;
  }
  stalled_ = std::move(s);
  SetStalled(true);
}

void HangWatch::SetStalled(bool stalled) {
  const int workers = static_cast<int>(cpu_.size());
  if (stalled) {
    spdlog::warn(
        "no worker made progress for {} (CPU time still, the same stacks twice): "
        "reporting {} stalled",
        HumanDuration(EventLoop::Now() - last_progress_),
        workers == 1 ? "the worker" : absl::StrCat("all ", workers, " workers"));
  } else {
    spdlog::info("workers progress again (CPU time moves): no longer stalled");
  }
  events_->Write("workers_stalled", {{"round", round_}, {"stalled", stalled}});
  rdzv::Stall stall{.stalled = stalled, .restartable = options_.restartable};
  if (stalled) stall.ranks = stalled_->summary;
  rdzv_->ReportStalled(round_, stall);
}

void HangWatch::OnJobEvent(const rdzv::Event& e) {
  const rdzv::Failure* f = nullptr;
  if (e.kind == rdzv::Event::Kind::kStopWorkers && e.failure) f = &*e.failure;
  if (e.kind == rdzv::Event::Kind::kFinished && e.outcome.root_cause) f = &*e.outcome.root_cause;
  if (f == nullptr || f->kind != rdzv::FailureKind::kHung || written_round_ == round_) return;
  written_round_ = round_;
  WriteHangFile(*f);
}

void HangWatch::WriteHangFile(const rdzv::Failure& f) {
  const std::string path = absl::StrCat(options_.run_dir, "/hang-round", round_, ".txt");
  std::string text = absl::StrCat("hang in round ", round_, ": ", f.message, "\nculprit: rank ",
                                  f.rank, " on ", f.host, " (pid ", f.pid, ")\n");
  if (!f.stderr_tail.empty())
    absl::StrAppend(&text, "\nevery rank by stack:\n", f.stderr_tail, "\n");
  absl::StrAppend(&text, "\nthis node's ranks:\n");
  if (!stalled_) absl::StrAppend(&text, "(no confirmed sample on this node)\n");
  for (const rdzv::RankStack& r : stalled_ ? stalled_->full : std::vector<rdzv::RankStack>{}) {
    absl::StrAppend(&text, "--- rank ", r.rank, " (local rank ", r.local_rank, ", pid ", r.pid,
                    ") ---\n", r.unavailable.empty() ? r.text : r.unavailable + "\n");
  }
  absl::Status st = WriteFileAtomically(path, text);
  if (!st.ok()) spdlog::warn("cannot write the hang's stacks: {}", std::string(st.message()));
  spdlog::error("hang: {}; this node's stacks in {}", f.message, path);
  events_->Write("hang_detected", {{"round", round_},
                                   {"rank", f.rank},
                                   {"host", f.host},
                                   {"line", f.message},
                                   {"stacks_file", st.ok() ? path : ""}});
}

}  // namespace muster
