// The shared port's side of its reactor (base/event_loop.h): accepts through
// base/acceptor.h, peeks at each new connection's first bytes, and hands it over once they
// decide (or its deadline, a timer of the loop, passes). Owned by SharedPort; only Stop()
// may be called from another thread, everything else belongs to the loop thread.
#ifndef MUSTER_RENDEZVOUS_SHARED_PORT_SHARED_PORT_LOOP_H_
#define MUSTER_RENDEZVOUS_SHARED_PORT_SHARED_PORT_LOOP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/acceptor.h"
#include "base/event_loop.h"
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
  // Thread-safe, async-signal-safe: EventLoop::Quit.
  void Stop();

 private:
  struct Undecided {
    UniqueFd fd;
    std::string peer;
    EventLoop::TimerId deadline;  // decides at its decide_timeout
  };

  SharedPortLoop(std::unique_ptr<EventLoop> loop, SharedPort::Options options);
  void Accepted(UniqueFd socket, const sockaddr_storage& peer);
  // Decides `id` from the bytes it has sent; `at_deadline`: its time is up.
  void Decide(uint64_t id, bool at_deadline);
  void HandOver(uint64_t id, Protocol protocol);
  void Drop(uint64_t id, const char* why);
  // Stops watching `u` (and its deadline, unless that is what fired).
  void Forget(Undecided& u);

  const std::unique_ptr<EventLoop> loop_;
  const SharedPort::Options options_;
  std::unique_ptr<Acceptor> acceptor_;
  absl::flat_hash_map<uint64_t, Undecided> undecided_;
  uint64_t next_id_ = 1;
};

}  // namespace muster::shared_port

#endif  // MUSTER_RENDEZVOUS_SHARED_PORT_SHARED_PORT_LOOP_H_
