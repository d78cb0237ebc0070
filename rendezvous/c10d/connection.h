// One accepted client socket of a StoreServer: non-blocking fd, input buffer
// decoded incrementally into Requests, and a bounded output buffer. Owned by
// the server's loop thread; not thread-safe.
#ifndef MUSTER_RENDEZVOUS_C10D_CONNECTION_H_
#define MUSTER_RENDEZVOUS_C10D_CONNECTION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/unique_fd.h"
#include "rendezvous/c10d/request_parser.h"
#include "rendezvous/c10d/store_state.h"
#include "rendezvous/c10d/wire.h"

namespace muster::c10d {

class Connection {
 public:
  Connection(ConnectionId id, UniqueFd fd, std::string peer, const Limits& limits)
      : id_(id), fd_(std::move(fd)), peer_(std::move(peer)), limits_(limits) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  ConnectionId id() const { return id_; }
  int fd() const { return fd_.get(); }
  const std::string& peer() const { return peer_; }

  // Reads what the socket has (one bounded chunk). False once the peer closed
  // its side.
  absl::StatusOr<bool> Read();

  // Decodes buffered requests and passes each to `handle`, stopping when the
  // input holds no complete request or the output is over the soft limit.
  // Errors (malformed input, a failing `handle`) mean the connection must be
  // closed.
  absl::Status ProcessInput(const std::function<absl::Status(Request&)>& handle);

  // Appends one reply, the concatenation of `parts`, whole or not at all. A
  // reply that would take the pending output past the hard limit is refused from
  // its size, before anything is allocated or copied; from then on nothing more
  // is queued or executed and the connection reports `overflowed()`: the server
  // closes it.
  void Queue(std::span<const std::string_view> parts);
  // Writes as much pending output as the socket takes.
  absl::Status Flush();

  size_t pending_output() const { return out_.size() - out_pos_; }
  bool overflowed() const { return overflowed_; }
  // Why overflowed(): the refused reply's size, the limit and what was pending.
  std::string OverflowReason() const;
  // Reading stops while the peer does not drain its replies.
  bool paused() const { return pending_output() > limits_.output_soft_limit_bytes; }
  bool has_buffered_input() const { return in_.size() > in_pos_; }

  // The epoll interest currently registered for fd(); maintained by the server.
  uint32_t registered_events = 0;

 private:
  ConnectionId id_;
  UniqueFd fd_;
  std::string peer_;
  const Limits& limits_;
  Protocol protocol_ = Protocol::kUnknown;
  std::string in_;
  size_t in_pos_ = 0;
  size_t in_needed_ = 1;  // no parse attempt until in_ holds this many bytes
  std::string out_;
  size_t out_pos_ = 0;
  bool overflowed_ = false;
  uint64_t refused_bytes_ = 0;    // size of the reply that overflowed
  uint64_t refused_pending_ = 0;  // output pending when it was refused
  Request request_;               // reused to keep vector capacity across requests
};

}  // namespace muster::c10d

#endif  // MUSTER_RENDEZVOUS_C10D_CONNECTION_H_
