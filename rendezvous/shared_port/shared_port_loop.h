// The event loop behind SharedPort: accepts, peeks at each new connection's first bytes,
// and hands it over once they decide (or its deadline passes). Owned by SharedPort; only
// Stop() may be called from another thread, everything else belongs to the loop thread.
#ifndef MUSTER_RENDEZVOUS_SHARED_PORT_SHARED_PORT_LOOP_H_
#define MUSTER_RENDEZVOUS_SHARED_PORT_SHARED_PORT_LOOP_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "rendezvous/shared_port/first_bytes.h"
#include "rendezvous/shared_port/shared_port.h"

namespace muster::shared_port {

class SharedPortLoop {
 public:
  static absl::StatusOr<std::unique_ptr<SharedPortLoop>> Create(UniqueFd listener,
                                                                SharedPort::Options options);
  // Serves until Stop(); closes every undecided connection before returning.
  void Run();
  // Thread-safe: wakes the loop through its eventfd.
  void Stop();

 private:
  struct Undecided {
    UniqueFd fd;
    std::string peer;
    absl::Time deadline;
  };

  SharedPortLoop(UniqueFd listener, UniqueFd epoll, UniqueFd wake, SharedPort::Options options);
  // Milliseconds until the next deadline (the oldest undecided connection, or the paused
  // listener's retry), -1 for none.
  int NextTimeoutMs(absl::Time now) const;
  void AcceptAll();
  void OnReadable(uint64_t id);
  void ExpireDeadlines(absl::Time now);
  // Decides `id` from the bytes it has sent; `at_deadline`: its time is up.
  void Decide(uint64_t id, bool at_deadline);
  void HandOver(uint64_t id, Protocol protocol);
  void Drop(uint64_t id, const char* why);

  UniqueFd listener_;
  UniqueFd epoll_;
  UniqueFd wake_;
  SharedPort::Options options_;
  absl::flat_hash_map<uint64_t, Undecided> undecided_;
  std::deque<uint64_t> by_deadline_;  // ids in accept order = deadline order; stale ids skipped
  uint64_t next_id_;
  absl::Time listener_paused_until_ = absl::InfinitePast();
  bool stopping_ = false;
};

}  // namespace muster::shared_port

#endif  // MUSTER_RENDEZVOUS_SHARED_PORT_SHARED_PORT_LOOP_H_
