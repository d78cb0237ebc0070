// ThreadSet: short-lived threads that a class starts now and then (one per rare request)
// and must not outlive it. Start() runs a function on a new thread and first joins the
// threads that have finished; the destructor joins the rest, so each function must end by
// a deadline of its own. Thread-safe; the functions may not call back into the set.
#ifndef MUSTER_BASE_THREAD_SET_H_
#define MUSTER_BASE_THREAD_SET_H_

#include <functional>
#include <list>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"

namespace muster {

class ThreadSet {
 public:
  ThreadSet() = default;
  ThreadSet(const ThreadSet&) = delete;
  ThreadSet& operator=(const ThreadSet&) = delete;

  ~ThreadSet() {
    std::list<std::thread> threads;
    {
      MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();  // not under mu_: a finishing thread takes it
  }

  void Start(std::function<void()> fn) {
    MutexLock lock(&mu_);
    for (auto it = threads_.begin(); it != threads_.end();) {
      if (finished_.erase(it->get_id()) == 0) {
        ++it;
        continue;
      }
      it->join();  // it has left fn and is about to return
      it = threads_.erase(it);
    }
    threads_.emplace_back([this, fn = std::move(fn)] {
      fn();
      MutexLock lock(&mu_);
      finished_.insert(std::this_thread::get_id());
    });
  }

 private:
  Mutex mu_;
  std::list<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::set<std::thread::id> finished_ ABSL_GUARDED_BY(mu_);
};

}  // namespace muster

#endif  // MUSTER_BASE_THREAD_SET_H_
