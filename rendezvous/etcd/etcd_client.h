// EtcdClient: the few etcd v3 calls the etcd rendezvous needs (KV Range/Put/DeleteRange,
// Lease Grant/Revoke/KeepAlive, Watch), over gRPC with etcd's own protos (proto/etcd).
// Several members: calls go to the current member; a member that is unreachable or
// without a leader (Unavailable, DeadlineExceeded) makes the call move on to the next one
// ("failover"), each member tried once per call. Plain structs out; no gRPC type leaks.
// With a user (Options::security), the first call authenticates; the token goes with
// every call and is renewed once when etcd no longer takes it (expired, auth changed).
//
// Thread-safe: calls may come from any thread at once (the member in use is atomic).
#ifndef MUSTER_RENDEZVOUS_ETCD_ETCD_CLIENT_H_
#define MUSTER_RENDEZVOUS_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/etcd/etcd_security.h"

namespace muster::rdzv::etcd {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

struct WatchEvent {
  bool deleted = false;  // else a put
  KeyValue kv;           // for a delete: key and mod_revision only
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;  // the store's revision the range was read at
};

class EtcdWatch;

class EtcdClient {
 public:
  struct Options {
    std::vector<std::string> endpoints;              // "host:port", at least one
    absl::Duration call_timeout = absl::Seconds(2);  // per member and call
    EtcdSecurity security;                           // TLS, user (none by default)
  };
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(const Options& options);
  ~EtcdClient();

  // A lease of `ttl` (whole seconds, rounded up); its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  absl::Status RevokeLease(int64_t lease);
  // One keep-alive of `lease`: its remaining TTL; NotFound once it has expired. Each member
  // gets at most `per_member` (and the call timeout): one that hangs (no leader yet, just
  // restarted) must leave time to try the next before the lease runs out.
  absl::StatusOr<absl::Duration> KeepAliveOnce(
      int64_t lease, absl::Duration per_member = absl::InfiniteDuration());
  // Puts `key` (with `lease` unless 0); the store's revision after it.
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Puts every (key, value) pair, with `lease` unless 0, in transactions of at most
  // kMaxTxnOps puts each (etcd's default --max-txn-ops): one raft entry per transaction,
  // e.g. one key per node of a round; up to kMaxConcurrentTxns in flight at once (threads
  // of the call). The store's revision after all of them. Not atomic across transactions:
  // after a failure the others may stay applied (put again).
  absl::StatusOr<int64_t> PutAll(const std::vector<std::pair<std::string, std::string>>& kvs,
                                 int64_t lease = 0);
  static constexpr int kMaxTxnOps = 128;
  static constexpr int kMaxConcurrentTxns = 8;
  // Every key under `prefix`, as of `revision` (0: the latest).
  absl::StatusOr<RangeResult> RangePrefix(const std::string& prefix, int64_t revision = 0);
  // The key under `prefix` with the lowest create revision (etcd sorts; one key comes
  // back, not the prefix): e.g. the oldest node key, which coordinates. nullopt: none.
  absl::StatusOr<std::optional<KeyValue>> Oldest(const std::string& prefix);
  // Oldest, with the store's revision it was read at (kvs: the oldest key, or none): a
  // watch of that key from revision + 1 misses none of its later changes.
  absl::StatusOr<RangeResult> OldestAt(const std::string& prefix);
  // `key` as of `revision` (0: the latest); OutOfRange once etcd compacted past it.
  absl::StatusOr<RangeResult> Get(const std::string& key, int64_t revision = 0);
  absl::Status DeletePrefix(const std::string& prefix);

  // Watches every key under `prefix` from `start_revision` on.
  std::unique_ptr<EtcdWatch> WatchPrefix(const std::string& prefix, int64_t start_revision);
  struct WatchOptions {
    bool prefix = true;         // every key under `key`; false: `key` alone
    bool deletes_only = false;  // etcd sends no puts (its NOPUT filter): e.g. who left
    // When set: every key in [key, range_end) (prefix ignored), e.g. two neighbouring
    // prefixes in one watch, whose events then come in one revision order.
    std::string range_end;
  };
  std::unique_ptr<EtcdWatch> Watch(const std::string& key, int64_t start_revision,
                                   const WatchOptions& options);

  // Which member calls go to now ("host:port"), for logs and tests.
  std::string current_endpoint() const;

  class Impl;

 private:
  explicit EtcdClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One watch on a prefix; reconnects through the client's members (resuming after the last
// revision it delivered) until `give_up` passes without a member that answers.
// Next blocks; Cancel (any thread) makes it return Cancelled.
class EtcdWatch {
 public:
  virtual ~EtcdWatch() = default;
  // The next batch of events (one revision or more), in revision order. Unavailable when
  // no member could be watched for `give_up`; OutOfRange when etcd compacted past the
  // revision to resume from; Cancelled after Cancel.
  virtual absl::Status Next(std::vector<WatchEvent>* events, absl::Duration give_up) = 0;
  virtual void Cancel() = 0;
};

// Put, retried every 200 ms until it succeeds or `give_up` has passed: rides out an etcd
// re-electing its leader (about a second), which fails every member's calls meanwhile.
absl::StatusOr<int64_t> PutWithin(EtcdClient& etcd, const std::string& key,
                                  const std::string& value, int64_t lease, absl::Duration give_up);

// The exclusive upper bound of a prefix range (etcd's "range_end").
std::string PrefixEnd(const std::string& prefix);

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_ETCD_CLIENT_H_
