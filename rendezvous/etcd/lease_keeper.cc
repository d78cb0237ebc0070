#include "rendezvous/etcd/lease_keeper.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::etcd {

LeaseKeeper::LeaseKeeper(EtcdClient* etcd, int64_t lease, absl::Duration ttl, absl::Time granted,
                         LostFn lost)
    : etcd_(etcd),
      lease_(lease),
      ttl_(ttl),
      on_lost_(std::move(lost)),
      deadline_(granted + ttl - StopMargin(ttl)) {
  keep_alive_ = std::thread([this] { RunKeepAlive(); });
  fence_ = std::thread([this] { RunFence(); });
}

LeaseKeeper::~LeaseKeeper() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  keep_alive_.join();
  fence_.join();
}

bool LeaseKeeper::Pause(absl::Duration d) {
  MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + d;
  while (!stopping_) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  return !stopping_;
}

void LeaseKeeper::RunKeepAlive() {
  absl::Duration pause = ttl_ / 3;
  while (!lost() && Pause(pause)) {
    const absl::Time sent = absl::Now();
    // A quarter TTL per member: a member that hangs (no leader yet after the leader's
    // death, or just restarted) used to hold the 2 s call timeout, then the next one as
    // long, past the lease deadline (the chaos test's etcd mode: exit 138, "none
    // answered in time", while two members had a leader).
    absl::StatusOr<absl::Duration> left = etcd_->KeepAliveOnce(lease_, ttl_ / 4);
    if (left.ok()) {
      MutexLock lock(&mu_);
      deadline_ = std::max(deadline_, sent + std::min(*left, ttl_) - StopMargin(ttl_));
      cv_.SignalAll();
      pause = ttl_ / 3;
      continue;
    }
    if (absl::IsNotFound(left.status())) {
      // etcd has dropped it already: the others may be under way without this node.
      return Lose(absl::UnavailableError(absl::StrCat("etcd lease lost (", left.status().message(),
                                                      "): dropped from the job")),
                  absl::Now());
    }
    spdlog::warn("etcd rendezvous: lease keep-alive failed ({}); retrying",
                 std::string(left.status().message()));
    {
      MutexLock lock(&mu_);
      last_error_ = std::string(left.status().message());
    }
    pause = std::min(ttl_ / 3, absl::Milliseconds(200));
  }
}

void LeaseKeeper::RunFence() {
  mu_.Lock();
  for (;;) {
    const absl::Time deadline = deadline_;
    // Woken by a renewal (a later deadline), by the stop, or at the deadline itself.
    while (!stopping_ && deadline_ == deadline) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    if (stopping_) {
      mu_.Unlock();
      return;
    }
    if (deadline_ == deadline && absl::Now() >= deadline) break;
  }
  const std::string last = last_error_.empty() ? "none answered in time" : last_error_;
  const absl::Time expiry = deadline_ + StopMargin(ttl_);  // the earliest etcd may drop it
  mu_.Unlock();
  Lose(absl::UnavailableError(absl::StrCat(
           "etcd lease lost (no member renewed it within its TTL of ", absl::FormatDuration(ttl_),
           "; last error: ", last, "): dropped from the job")),
       expiry);
}

void LeaseKeeper::Lose(absl::Status why, absl::Time kill_by) {
  if (lost_.exchange(true)) return;
  on_lost_(RendezvousError{.status = std::move(why), .kill_by = kill_by});
}

}  // namespace muster::rdzv::etcd
