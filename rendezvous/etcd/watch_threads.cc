#include "rendezvous/etcd/watch_threads.h"

#include <utility>

namespace muster::rdzv::etcd {

int WatchThreads::Add(std::unique_ptr<EtcdWatch> watch, absl::Duration give_up, Sink sink) {
  std::shared_ptr<EtcdWatch> shared = std::move(watch);
  MutexLock lock(&mu_);
  if (stopped_) return -1;
  const int id = next_id_++;
  Entry& entry = entries_[id];
  entry.watch = shared;
  entry.thread = std::thread([shared, give_up, sink = std::move(sink)] {
    for (;;) {
      std::vector<WatchEvent> events;
      absl::Status s = shared->Next(&events, give_up);
      if (absl::IsCancelled(s)) return;
      sink(s, std::move(events));
      if (!s.ok()) return;
    }
  });
  return id;
}

void WatchThreads::Remove(int id) {
  std::vector<Entry> gone;
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    gone.push_back(std::move(it->second));
    entries_.erase(it);
  }
  Finish(std::move(gone));
}

void WatchThreads::Stop() {
  std::vector<Entry> gone;
  {
    MutexLock lock(&mu_);
    stopped_ = true;
    for (auto& [id, entry] : entries_) gone.push_back(std::move(entry));
    entries_.clear();
  }
  Finish(std::move(gone));
}

void WatchThreads::Finish(std::vector<Entry> entries) {
  for (Entry& e : entries) e.watch->Cancel();  // all at once, then the joins
  for (Entry& e : entries) {
    if (e.thread.joinable()) e.thread.join();
  }
}

}  // namespace muster::rdzv::etcd
