// Mutex, MutexLock, CondVar: absl::Mutex and absl::CondVar as muster's one kind of lock,
// with clang's thread-safety attributes (a member is ABSL_GUARDED_BY(mu_), a function that
// expects the lock is ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_); the clang builds compile with
// -Wthread-safety, docs/design.md §4.10) and one addition:
// ThreadSanitizer sees them.
//
// Why not absl::Mutex itself: Debian's libabsl_synchronization is not compiled with
// -fsanitize=thread, so TSan cannot see its lock and unlock (atomics and futexes inside an
// uninstrumented library) and reports every access under it as a race. Here each lock is
// an acquire and each unlock a release of the mutex's address (base/tsan.h), and a wait
// on a CondVar is an unlock and a lock. Without -fsanitize=thread the annotations compile
// to nothing and these classes are absl's, inline.
//
// No Mutex::Await(Condition): absl evaluates a Condition on whichever thread unlocks,
// outside what TSan is told here. Wait on a CondVar in a loop that re-checks the state,
// always with a deadline (STYLE: every wait has a deadline).
#ifndef MUSTER_BASE_MUTEX_H_
#define MUSTER_BASE_MUTEX_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/tsan.h"

namespace muster {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.Lock();
    TsanAcquire(this);
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    TsanRelease(this);
    mu_.Unlock();
  }
  // Tells the analysis the lock is held where it cannot follow (a callback run under it).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() { mu_.AssertHeld(); }

 private:
  friend class CondVar;
  absl::Mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// absl::CondVar: Wait* release `mu` while they wait and hold it again when they return,
// also on a timeout; a wake-up may be spurious, so the caller re-checks its state.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    TsanRelease(mu);
    cv_.Wait(&mu->mu_);
    TsanAcquire(mu);
  }
  // True when the timeout expired (absl::CondVar's convention).
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    TsanRelease(mu);
    bool expired = cv_.WaitWithTimeout(&mu->mu_, timeout);
    TsanAcquire(mu);
    return expired;
  }
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    TsanRelease(mu);
    bool expired = cv_.WaitWithDeadline(&mu->mu_, deadline);
    TsanAcquire(mu);
    return expired;
  }
  void Signal() { cv_.Signal(); }
  void SignalAll() { cv_.SignalAll(); }

 private:
  absl::CondVar cv_;
};

}  // namespace muster

#endif  // MUSTER_BASE_MUTEX_H_
