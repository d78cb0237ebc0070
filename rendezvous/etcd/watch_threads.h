// WatchThreads: an agent's etcd watches (its own events key, the coordinator's node key,
// the requests, and the coordinator's reports), each read by a thread of its own that
// hands every batch, or the watch's end, to the watch's sink (the agent's task queue).
// Watches come and go: the coordinator's key, watched for its deletion, changes with the
// coordinator.
//
// Thread-safe. Remove and Stop wait for the watch's thread: never call them from a sink.
#ifndef MUSTER_RENDEZVOUS_ETCD_WATCH_THREADS_H_
#define MUSTER_RENDEZVOUS_ETCD_WATCH_THREADS_H_

#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "rendezvous/etcd/etcd_client.h"

namespace muster::rdzv::etcd {

class WatchThreads {
 public:
  // On the watch's thread: a batch (ok), or the watch's end (Unavailable, OutOfRange; never
  // Cancelled, which is Remove's or Stop's doing).
  using Sink = std::function<void(const absl::Status&, std::vector<WatchEvent>)>;

  WatchThreads() = default;
  WatchThreads(const WatchThreads&) = delete;
  WatchThreads& operator=(const WatchThreads&) = delete;
  ~WatchThreads() { Stop(); }

  // Reads `watch` until it ends (EtcdWatch::Next's `give_up`); its id, for Remove. After
  // Stop the watch is dropped at once (-1).
  int Add(std::unique_ptr<EtcdWatch> watch, absl::Duration give_up, Sink sink);
  // Cancels watch `id` and waits for its thread; an unknown id is ignored.
  void Remove(int id);
  // Cancels every watch and waits for their threads; later Adds are dropped.
  void Stop();

 private:
  struct Entry {
    std::shared_ptr<EtcdWatch> watch;
    std::thread thread;
  };
  static void Finish(std::vector<Entry> entries);

  Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_WATCH_THREADS_H_
