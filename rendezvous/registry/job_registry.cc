#include "rendezvous/registry/job_registry.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/exit_codes.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv {
namespace {

constexpr absl::Duration kMaxTimerSleep = absl::Hours(1);

bool IsRetryableEnd(const Job& job) {
  return job.phase() == Job::Phase::kFinished && job.outcome() &&
         job.outcome()->exit_code == exit_code::kTransient;
}

}  // namespace

JobRegistry::JobRegistry(std::string required_run_id, absl::Duration liveness_interval,
                         int liveness_misses, absl::Duration job_retention)
    : required_run_id_(std::move(required_run_id)),
      liveness_interval_(liveness_interval),
      liveness_misses_(liveness_misses),
      job_retention_(job_retention),
      timer_([this] { TimerLoop(); }) {}

JobRegistry::~JobRegistry() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.SignalAll();
  timer_.join();
}

absl::Status JobRegistry::Join(std::shared_ptr<NodeStream> stream, const NodeInfo& node,
                               const JobSpec& spec) {
  if (!required_run_id_.empty() && spec.run_id != required_run_id_) {
    return absl::InvalidArgumentError(
        absl::StrCat("run id '", spec.run_id, "' of node ", node.host, " (", node.node_id,
                     ") does not match this server's run id '", required_run_id_,
                     "'; start every agent with the same --rdzv-id"));
  }
  if (node.node_id.empty()) return absl::InvalidArgumentError("join without a node id");
  Streams touched;
  bool wake = false;
  {
    MutexLock lock(&mu_);
    absl::Time now = absl::Now();
    if (members_.count(node.node_id) != 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("node id ", node.node_id, " is already joined on another stream"));
    }
    auto it = jobs_.find(spec.run_id);
    if (it != jobs_.end() && IsRetryableEnd(it->second.host.job())) {
      // The job ended on a transient problem (exit 138: Pods are restarted for it); the
      // restarted agents start the job afresh instead of being refused forever.
      spdlog::info("rendezvous: job {} ended with 138 earlier; {} starts it again", spec.run_id,
                   node.host);
      jobs_.erase(it);
    }
    bool created = false;
    std::tie(it, created) = jobs_.try_emplace(spec.run_id, this, spec, now);
    // Routed before the Job call so that the joiner's own events reach it.
    members_[node.node_id] = Member{.run_id = spec.run_id, .stream = stream};
    absl::Status joined = it->second.host.Join(node, spec, now);
    if (!joined.ok()) {
      members_.erase(node.node_id);
      if (created) jobs_.erase(it);
      return joined;
    }
    ++it->second.connected;
    it->second.unattended_since = absl::InfiniteFuture();
    if (observer_) observer_->OnJoin();
    if (created) {
      spdlog::info("rendezvous: job {} created by {}", spec.run_id, node.host);
      // The server's sockets, not the job, decide when a silent node is lost; an agent that
      // gives up sooner than the server exits 138 while the server still counts it.
      if (spec.heartbeat_interval != liveness_interval_ ||
          spec.heartbeat_misses != liveness_misses_) {
        spdlog::warn(
            "rendezvous: job {} asks for heartbeat_interval={} x heartbeat_misses={} (--rdzv-conf "
            "of {}), but this server checks its connections every {} x {}: a partitioned node "
            "is noticed after {}; start the server with the job's values (muster serve "
            "--heartbeat-interval/--heartbeat-misses, or the same --rdzv-conf on the hosting "
            "agent)",
            spec.run_id, absl::FormatDuration(spec.heartbeat_interval), spec.heartbeat_misses,
            node.host, absl::FormatDuration(liveness_interval_), liveness_misses_,
            absl::FormatDuration(liveness_interval_ * liveness_misses_));
      }
    }
    spdlog::debug("rendezvous: {} ({}) joined job {}", node.host, node.address, spec.run_id);
    touched = std::exchange(touched_, {});
    wake = TimerMustWakeLocked(it->second.host.job());
  }
  if (wake) wake_.SignalAll();
  FlushAll(touched);
  NotifyWatchers();
  return absl::OkStatus();
}

void JobRegistry::Heartbeat(const std::string& node_id) {
  WithNodeJob(
      node_id, [&](JobHost& host, absl::Time now) { host.Heartbeat(node_id, now); },
      /*notify=*/false);
}

void JobRegistry::WorkersStarted(const std::string& node_id, int round,
                                 const std::vector<StartedWorker>& workers) {
  WithNodeJob(node_id, [&](JobHost& host, absl::Time now) {
    host.WorkersStarted(node_id, round, workers, now);
  });
}

void JobRegistry::WorkerEnded(const std::string& node_id, int round, const EndedWorker& ended) {
  WithNodeJob(node_id,
              [&](JobHost& host, absl::Time now) { host.WorkerEnded(node_id, round, ended, now); });
}

void JobRegistry::NodeStalled(const std::string& node_id, int round, const Stall& stall) {
  WithNodeJob(node_id,
              [&](JobHost& host, absl::Time now) { host.NodeStalled(node_id, round, stall, now); });
}

void JobRegistry::NodeSampled(const std::string& node_id, int round,
                              const StragglerSample& sample) {
  WithNodeJob(node_id, [&](JobHost& host, absl::Time now) {
    host.NodeSampled(node_id, round, sample, now);
  });
}

void JobRegistry::NodeHealth(const std::string& node_id, const std::string& excluded) {
  WithNodeJob(node_id,
              [&](JobHost& host, absl::Time now) { host.NodeHealth(node_id, excluded, now); });
}

void JobRegistry::WorkerFailed(const std::string& node_id, int round, const Failure& failure) {
  WithNodeJob(node_id, [&](JobHost& host, absl::Time now) {
    host.WorkerFailed(node_id, round, failure, now);
  });
}

void JobRegistry::WorkersSucceeded(const std::string& node_id, int round) {
  WithNodeJob(node_id,
              [&](JobHost& host, absl::Time now) { host.WorkersSucceeded(node_id, round, now); });
}

void JobRegistry::WorkersStopped(const std::string& node_id, int round, int store_port) {
  WithNodeJob(node_id, [&](JobHost& host, absl::Time now) {
    host.WorkersStopped(node_id, round, store_port, now);
  });
}

void JobRegistry::NodeLost(const std::string& node_id, const std::string& why) {
  WithNodeJob(node_id, [&](JobHost& host, absl::Time now) {
    // After the outcome every agent hangs up: that is the normal end, not news.
    const Job& job = host.job();
    spdlog::log(job.phase() == Job::Phase::kFinished ? spdlog::level::debug : spdlog::level::info,
                "rendezvous: node {} of job {} lost: {}", node_id, job.spec().run_id, why);
    host.NodeLost(node_id, why, now);
  });
  {
    MutexLock lock(&mu_);
    auto member = members_.find(node_id);
    if (member != members_.end()) EraseMemberLocked(member, absl::Now());
  }
  wake_.SignalAll();  // also the timer: the job may be unattended now (its retention)
}

JobRegistry::Members::iterator JobRegistry::EraseMemberLocked(Members::iterator m, absl::Time now) {
  auto entry = jobs_.find(m->second.run_id);
  if (entry != jobs_.end() && --entry->second.connected == 0) {
    entry->second.unattended_since = now;
  }
  return members_.erase(m);
}

std::optional<absl::Time> JobRegistry::ForgetUnattendedLocked(absl::Time now) {
  std::optional<absl::Time> next;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    const JobEntry& entry = it->second;
    if (entry.connected > 0 || entry.unattended_since == absl::InfiniteFuture()) {
      ++it;
      continue;
    }
    const absl::Time forget_at = entry.unattended_since + job_retention_;
    if (forget_at > now) {
      if (!next || forget_at < *next) next = forget_at;
      ++it;
      continue;
    }
    spdlog::info(
        "rendezvous: forgetting job {} ({}): no agent of it connected for {} "
        "(--job-retention)",
        it->first, JobPhaseName(PhaseOf(entry.host.job())), absl::FormatDuration(job_retention_));
    it = jobs_.erase(it);
  }
  return next;
}

bool JobRegistry::WaitForMembersToLeave(const std::string& except_node_id, absl::Time deadline) {
  MutexLock lock(&mu_);
  auto gone = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || members_.empty() ||
           (members_.size() == 1 && members_.count(except_node_id) == 1);
  };
  while (!gone()) {
    if (wake_.WaitWithDeadline(&mu_, deadline)) return gone();
  }
  return true;
}

void JobRegistry::WithNodeJob(const std::string& node_id, const JobCall& call, bool notify) {
  Streams touched;
  bool wake = false;
  {
    MutexLock lock(&mu_);
    auto member = members_.find(node_id);
    if (member == members_.end()) return;
    auto entry = jobs_.find(member->second.run_id);
    if (entry == jobs_.end()) return;
    call(entry->second.host, absl::Now());
    touched = std::exchange(touched_, {});
    wake = TimerMustWakeLocked(entry->second.host.job());
  }
  if (wake) wake_.SignalAll();
  FlushAll(touched);
  if (notify) NotifyWatchers();
}

bool JobRegistry::TimerMustWakeLocked(const Job& job) const {
  std::optional<absl::Time> due = job.NextDeadline();
  return due && *due < timer_until_;
}

void JobRegistry::JobEntry::Deliver(std::vector<Event> events, absl::Time /*now*/) {
  version = ++registry->versions_;
  registry->RouteLocked(events, &registry->touched_);
}

void JobRegistry::JobEntry::RoundStarted(absl::Duration formed_in) {
  if (registry->observer_) registry->observer_->OnRoundStarted(formed_in);
}

void JobRegistry::RouteLocked(const std::vector<Event>& events, Streams* touched) {
  for (const Event& event : events) {
    auto member = members_.find(event.node_id);
    if (member == members_.end()) continue;  // its stream is already gone
    member->second.stream->Enqueue(event);
    // A stream listed twice is flushed twice, which is harmless (Flush does nothing while a
    // write is under way or nothing is queued); searching the list for every event made a
    // round's RoundStarted broadcast O(nodes^2).
    if (touched->empty() || touched->back() != member->second.stream) {
      touched->push_back(member->second.stream);
    }
  }
}

void JobRegistry::AddWatcher(std::weak_ptr<StatusWatcher> watcher) {
  MutexLock lock(&mu_);
  watchers_.push_back(std::move(watcher));
}

void JobRegistry::SetObserver(std::shared_ptr<RegistryObserver> observer) {
  MutexLock lock(&mu_);
  observer_ = std::move(observer);
}

RegistryCounts JobRegistry::Counts() const {
  MutexLock lock(&mu_);
  RegistryCounts counts;
  for (const auto& [run_id, entry] : jobs_) {
    ++counts.jobs_by_phase[PhaseOf(entry.host.job())];
    for (const Job::NodeView& node : entry.host.job().NodeViews()) {
      ++counts.nodes_by_state[node.state];
    }
  }
  return counts;
}

void JobRegistry::NotifyWatchers() {
  std::vector<std::shared_ptr<StatusWatcher>> live;
  {
    MutexLock lock(&mu_);
    if (watchers_.empty()) return;
    for (auto it = watchers_.begin(); it != watchers_.end();) {
      if (auto w = it->lock()) {
        live.push_back(std::move(w));
        ++it;
      } else {
        it = watchers_.erase(it);
      }
    }
  }
  for (const auto& w : live) w->Poke();
}

void JobRegistry::FlushAll(const Streams& streams) {
  for (const auto& stream : streams) stream->Flush();
}

void JobRegistry::TimerLoop() {
  mu_.Lock();
  while (!stopping_) {
    absl::Time now = absl::Now();
    std::optional<absl::Time> next;
    std::vector<std::shared_ptr<NodeStream>> dropped;
    for (auto& [run_id, entry] : jobs_) {
      std::optional<absl::Time> due;
      if (entry.host.TickIfDue(now, &due)) {
        // Nodes the job declared lost on a deadline still have a stream (a partition
        // keeps TCP half-open): end it, so the node learns it is out if it comes back.
        const Job& job = entry.host.job();
        std::set<std::string> live;
        for (const NodeInfo& n : job.Nodes()) live.insert(n.node_id);
        for (auto m = members_.begin(); m != members_.end();) {
          if (m->second.run_id == run_id && !live.count(m->first) &&
              job.phase() != Job::Phase::kFinished) {
            dropped.push_back(m->second.stream);
            m = EraseMemberLocked(m, now);
          } else {
            ++m;
          }
        }
      }
      if (due && (!next || *due < *next)) next = due;
    }
    Streams touched = std::exchange(touched_, {});
    if (!touched.empty() || !dropped.empty()) {
      mu_.Unlock();
      FlushAll(touched);
      NotifyWatchers();
      for (const auto& stream : dropped) {
        stream->Close(absl::UnavailableError(
            "the rendezvous declared this node lost (its workers did not stop in time); the "
            "job went on without it"));
      }
      wake_.SignalAll();  // WaitForMembersToLeave
      mu_.Lock();
      continue;  // jobs may have changed while unlocked
    }
    std::optional<absl::Time> forget = ForgetUnattendedLocked(now);
    if (forget && (!next || *forget < *next)) next = forget;
    absl::Time until = std::min(next.value_or(absl::InfiniteFuture()), now + kMaxTimerSleep);
    timer_until_ = until;
    wake_.WaitWithDeadline(&mu_, until);
    timer_until_ = absl::InfinitePast();  // awake: the loop looks at every deadline again
  }
  mu_.Unlock();
}

absl::StatusOr<uint64_t> JobRegistry::StatusVersion(const std::string& run_id) const {
  MutexLock lock(&mu_);
  auto it = jobs_.find(run_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job with run id '", run_id, "' on this server"));
  }
  return it->second.version;
}

absl::StatusOr<JobStatusSnapshot> JobRegistry::Status(const std::string& run_id,
                                                      uint64_t* version) const {
  MutexLock lock(&mu_);
  auto it = jobs_.find(run_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job with run id '", run_id, "' on this server"));
  }
  if (version != nullptr) *version = it->second.version;
  return JobStatusOf(it->second.host.job());
}

absl::StatusOr<std::vector<StacksTarget>> JobRegistry::StacksTargets(
    const std::string& run_id) const {
  absl::StatusOr<JobStatusSnapshot> status = Status(run_id);
  if (!status.ok()) return status.status();
  std::vector<StacksTarget> out;
  MutexLock lock(&mu_);
  for (const NodeStatus& n : status->nodes) {
    auto it = members_.find(n.node_id);
    if (it == members_.end() || it->second.run_id != run_id) continue;
    out.push_back({.node_id = n.node_id,
                   .host = n.host,
                   .group_rank = n.group_rank,
                   .stream = it->second.stream});
  }
  std::stable_sort(out.begin(), out.end(), [](const StacksTarget& a, const StacksTarget& b) {
    return static_cast<unsigned>(a.group_rank) < static_cast<unsigned>(b.group_rank);
  });
  return out;
}

std::vector<JobSummary> JobRegistry::Summaries() const {
  MutexLock lock(&mu_);
  std::vector<JobSummary> out;
  out.reserve(jobs_.size());
  for (const auto& [run_id, entry] : jobs_) out.push_back(JobSummaryOf(entry.host.job()));
  std::sort(out.begin(), out.end(),
            [](const JobSummary& a, const JobSummary& b) { return a.run_id < b.run_id; });
  return out;
}

}  // namespace muster::rdzv
