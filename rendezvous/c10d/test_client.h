// Test-only blocking TCPStore client written from the byte layouts of
// reference/torch_contract.md §1.3, for either protocol family. Every read is
// bounded by a deadline, so a server bug fails a test instead of hanging it.
// Not thread-safe.
#ifndef MUSTER_RENDEZVOUS_C10D_TEST_CLIENT_H_
#define MUSTER_RENDEZVOUS_C10D_TEST_CLIENT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/unique_fd.h"
#include "rendezvous/c10d/wire.h"

namespace muster::c10d {

// Builds one request: opcode byte for (protocol, op), then fields in call
// order.
class RequestBytes {
 public:
  RequestBytes(Protocol protocol, Op op);
  RequestBytes& Str(std::string_view s);
  RequestBytes& U32(uint32_t v);
  RequestBytes& U64(uint64_t v);
  RequestBytes& I64(int64_t v) { return U64(static_cast<uint64_t>(v)); }
  RequestBytes& Keys(const std::vector<std::string>& keys);
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

class TestClient {
 public:
  static constexpr absl::Duration kDefaultTimeout = absl::Seconds(10);

  // Connects to 127.0.0.1:port; a modern client sends VALIDATE first (no
  // reply).
  static absl::StatusOr<TestClient> Connect(uint16_t port, Protocol protocol);

  absl::Status SendRaw(std::string_view bytes);
  absl::Status Send(const RequestBytes& request) { return SendRaw(request.bytes()); }
  // Exactly n bytes or DeadlineExceeded / Unavailable (EOF).
  absl::StatusOr<std::string> Read(size_t n, absl::Duration timeout = kDefaultTimeout);
  absl::StatusOr<uint8_t> ReadU8(absl::Duration timeout = kDefaultTimeout);
  absl::StatusOr<int64_t> ReadI64();
  absl::StatusOr<std::string> ReadString();
  // True when the server closed the connection (EOF or reset) within `timeout`.
  bool ClosedWithin(absl::Duration timeout);
  // True when no byte arrives within `timeout` (a delayed reply is still
  // pending).
  bool SilentFor(absl::Duration timeout);

  RequestBytes Request(Op op) const { return RequestBytes(protocol_, op); }

  // One call per operation; blocking ones wait for their reply.
  absl::Status Set(std::string_view key, std::string_view value);
  absl::StatusOr<std::string> Get(std::string_view key);
  absl::StatusOr<int64_t> Add(std::string_view key, int64_t delta);
  absl::StatusOr<std::string> CompareSet(std::string_view key, std::string_view expected,
                                         std::string_view desired);
  absl::StatusOr<uint8_t> Check(const std::vector<std::string>& keys);
  absl::Status SendWait(const std::vector<std::string>& keys);
  absl::StatusOr<int64_t> NumKeys();
  absl::StatusOr<int64_t> DeleteKey(std::string_view key);
  absl::Status Append(std::string_view key, std::string_view value);
  absl::StatusOr<std::vector<std::string>> MultiGet(const std::vector<std::string>& keys);
  absl::Status MultiSet(const std::vector<std::pair<std::string, std::string>>& kvs);

 private:
  TestClient(UniqueFd fd, Protocol protocol) : fd_(std::move(fd)), protocol_(protocol) {}

  UniqueFd fd_;
  Protocol protocol_;
};

}  // namespace muster::c10d

#endif  // MUSTER_RENDEZVOUS_C10D_TEST_CLIENT_H_
