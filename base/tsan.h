// Happens-before annotations for ThreadSanitizer at hand-offs it cannot see: work given to
// Debian's uninstrumented gRPC on one thread and called back on another (its completion
// queues synchronise through absl::Mutex and atomics that TSan does not observe).
//
//   { TsanCallOut out(this); StartWrite(&msg); }          // every call that hands work over
//   void OnWriteDone(bool ok) override { TsanReaction in(this); ... }  // every callback
//
// TsanCallOut releases `sync` (what this thread did before happens before every reaction
// that acquires it) and, for the length of the call, stops recording this thread's memory
// accesses: the call runs gRPC's header code compiled into our binary and serialises the
// message being written, and those accesses are gRPC's, ordered by gRPC's own invisible
// synchronisation, exactly like the uninstrumented libgrpc++ beside them. TsanReaction
// acquires `sync` on entry and releases it on return; a reaction that gRPC runs inline
// inside a TsanCallOut is recorded again for its length. Without -fsanitize=thread all of
// this compiles to nothing. Thread-safe; the guards are per thread and must nest.
#ifndef MUSTER_BASE_TSAN_H_
#define MUSTER_BASE_TSAN_H_

#if defined(__SANITIZE_THREAD__)
#define MUSTER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MUSTER_TSAN 1
#endif
#endif

#ifdef MUSTER_TSAN
#include <sanitizer/tsan_interface.h>
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace muster {

inline void TsanRelease([[maybe_unused]] const void* sync) {
#ifdef MUSTER_TSAN
  __tsan_release(const_cast<void*>(sync));
#endif
}

inline void TsanAcquire([[maybe_unused]] const void* sync) {
#ifdef MUSTER_TSAN
  __tsan_acquire(const_cast<void*>(sync));
#endif
}

#ifdef MUSTER_TSAN
namespace tsan_internal {
// TsanCallOut scopes open on this thread (accesses are not recorded while > 0).
inline thread_local int calls_out = 0;
}  // namespace tsan_internal
#endif

class TsanCallOut {
 public:
  explicit TsanCallOut([[maybe_unused]] const void* sync) {
#ifdef MUSTER_TSAN
    TsanRelease(sync);
    if (tsan_internal::calls_out++ == 0) __tsan_ignore_thread_begin();
#endif
  }
  ~TsanCallOut() {
#ifdef MUSTER_TSAN
    if (--tsan_internal::calls_out == 0) __tsan_ignore_thread_end();
#endif
  }
  TsanCallOut(const TsanCallOut&) = delete;
  TsanCallOut& operator=(const TsanCallOut&) = delete;
};

class TsanReaction {
 public:
  explicit TsanReaction([[maybe_unused]] const void* sync) : sync_(sync) {
#ifdef MUSTER_TSAN
    outer_calls_out_ = tsan_internal::calls_out;
    tsan_internal::calls_out = 0;
    if (outer_calls_out_ > 0) __tsan_ignore_thread_end();
    TsanAcquire(sync_);
#endif
  }
  ~TsanReaction() {
#ifdef MUSTER_TSAN
    TsanRelease(sync_);
    if (outer_calls_out_ > 0) __tsan_ignore_thread_begin();
    tsan_internal::calls_out = outer_calls_out_;
#endif
  }
  TsanReaction(const TsanReaction&) = delete;
  TsanReaction& operator=(const TsanReaction&) = delete;

 private:
  [[maybe_unused]] const void* const sync_;
  [[maybe_unused]] int outer_calls_out_ = 0;
};

}  // namespace muster

#endif  // MUSTER_BASE_TSAN_H_
