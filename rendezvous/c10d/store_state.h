// The key-value state behind a TCPStore server and the semantics of every
// operation of both protocol families (reference/torch_contract.md §1.3, union
// rules of §5.1.3): keys, queues, WAIT registrations (torch's keysAwaited
// bookkeeping), barriers and legacy WATCH_KEY callbacks. Owned by StoreServer
// and used only from its loop thread; not thread-safe. No sockets here: replies
// go through an Outbox, so tests can drive it alone.
#ifndef MUSTER_RENDEZVOUS_C10D_STORE_STATE_H_
#define MUSTER_RENDEZVOUS_C10D_STORE_STATE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "rendezvous/c10d/request_parser.h"

namespace muster::c10d {

// Never reused within one server, unlike file descriptors.
using ConnectionId = uint64_t;

// Where replies and asynchronous wake-ups go; bytes for one connection stay in
// order.
class Outbox {
 public:
  virtual ~Outbox() = default;
  // Queues the concatenation of `parts` as one reply, or nothing: a receiver may
  // refuse a reply whole, from its size, before copying any of it (StoreLoop does
  // when it would pass the connection's output limit, and closes the
  // connection). `parts` are views of the stored values, valid only during the
  // call, so no reply is ever assembled outside the connection's buffer.
  virtual void Send(ConnectionId conn, std::span<const std::string_view> parts) = 0;
};

class StoreState {
 public:
  // `max_bytes`: the most the keys and values (queues too) may hold in all; a request that
  // would store more fails (ResourceExhausted) and stores nothing.
  explicit StoreState(Outbox* outbox, uint64_t max_bytes = UINT64_MAX)
      : outbox_(outbox), max_bytes_(max_bytes) {}
  StoreState(const StoreState&) = delete;
  StoreState& operator=(const StoreState&) = delete;

  // Applies `request` from `conn`; moves strings out of it. An error (ADD or
  // BARRIER on a non-numeric value) means the caller must close `conn`, as
  // torch does.
  absl::Status Execute(ConnectionId conn, Request& request);

  // Forgets a closed connection's wait registrations and watches.
  void DropConnection(ConnectionId conn);

  size_t num_keys() const { return values_.size(); }
  // Bytes of keys and values held (each key once, with its value or queued values).
  uint64_t bytes() const { return bytes_; }
  size_t num_waiting_connections() const { return waits_.size(); }

 private:
  struct WaitState {
    int64_t remaining = 0;          // torch's keysAwaited_[socket]
    std::vector<std::string> keys;  // where this connection may sit in waiters_
  };

  void Reply(ConnectionId conn, std::string_view bytes) { outbox_->Send(conn, {&bytes, 1}); }
  // How many bytes `request` may add at most; ResourceExhausted, naming the limit, when
  // that would pass max_bytes_.
  absl::Status CheckRoom(const Request& request) const;
  // What storing `size` bytes as `key`'s value adds (negative: frees).
  int64_t Growth(const std::string& key, size_t size) const;
  // `u64 len` + `value`, sent from where `value` is stored.
  void ReplyString(ConnectionId conn, std::string_view value);
  bool Present(const std::string& key) const;
  std::string_view ValueOrEmpty(const std::string& key) const;
  void StoreValue(const std::string& key, std::string value);
  void Register(ConnectionId conn, std::vector<std::string> missing);
  // Every waiter of `key` counts one key down; those reaching zero get
  // STOP_WAITING.
  void WakeAll(const std::string& key);
  // Only the longest-waiting connection of `key` (QUEUE_PUSH).
  void WakeOne(const std::string& key);
  void CountDown(ConnectionId conn);
  void ClearWaits(ConnectionId conn);
  void NotifyWatchers(const std::string& key, uint8_t type, std::string_view old_value,
                      std::string_view new_value);

  void Append(Request& request);
  void MultiGet(ConnectionId conn, const Request& request);
  void DeleteKey(ConnectionId conn, const std::string& key);
  void Wait(ConnectionId conn, Request& request);
  absl::Status Add(ConnectionId conn, Request& request);
  void CompareSet(ConnectionId conn, Request& request);
  absl::Status Barrier(ConnectionId conn, Request& request);
  void QueuePop(ConnectionId conn, const std::string& key);
  void ListKeys(ConnectionId conn);

  Outbox* outbox_;  // not owned
  const uint64_t max_bytes_;
  uint64_t bytes_ = 0;  // see bytes()
  absl::flat_hash_map<std::string, std::string> values_;
  absl::flat_hash_map<std::string, std::deque<std::string>> queues_;
  absl::flat_hash_map<std::string, std::vector<ConnectionId>> waiters_;
  absl::flat_hash_map<ConnectionId, WaitState> waits_;
  absl::flat_hash_map<std::string, std::vector<ConnectionId>> watchers_;
  absl::flat_hash_map<ConnectionId, std::vector<std::string>> watched_keys_;
};

// std::stoll semantics (leading blanks, sign, digits, trailing bytes ignored):
// torch keeps counters as ASCII decimal and parses them this way.
// InvalidArgument when no digits or on overflow.
absl::StatusOr<int64_t> ParseCounter(const std::string& text);

}  // namespace muster::c10d

#endif  // MUSTER_RENDEZVOUS_C10D_STORE_STATE_H_
