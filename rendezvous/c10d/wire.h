// TCPStore wire vocabulary shared by the parser, the store and the tests: the
// two opcode families (torch 1.13-2.1 "legacy" and torch 2.4+ "modern"),
// response codes, limits and little-endian encoders. See
// reference/torch_contract.md §1.2-§1.3.
#ifndef MUSTER_RENDEZVOUS_C10D_WIRE_H_
#define MUSTER_RENDEZVOUS_C10D_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace muster::c10d {

// Which numbering a connection speaks; decided from its first bytes.
enum class Protocol : uint8_t { kUnknown, kLegacy, kModern };

// Operations, independent of their opcode numbering.
enum class Op : uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kGetNumKeys,
  kWatchKey,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kListKeys,
  kBarrier,
};

// torch's name of `op` ("SET", "MULTI_SET", ...), for log lines and errors.
const char* OpName(Op op);

// Maps an opcode byte to its operation for `protocol` (kLegacy or kModern);
// nullopt for bytes that the family does not define. VALIDATE maps only for
// kModern.
std::optional<Op> DecodeOpcode(Protocol protocol, uint8_t opcode);

// The inverse, for test clients. Returns nullopt when the family lacks `op`.
std::optional<uint8_t> EncodeOpcode(Protocol protocol, Op op);

// Modern connections start with opcode 0x00 followed by this u32 (wire: CE F7
// 85 3C).
inline constexpr uint32_t kValidationMagic = 0x3C85F7CE;

// CheckResponseType / WaitResponseType / WatchResponseType (single bytes).
inline constexpr uint8_t kCheckReady = 0;
inline constexpr uint8_t kCheckNotReady = 1;
inline constexpr uint8_t kStopWaiting = 0;
inline constexpr uint8_t kWaitCanceled = 1;
inline constexpr uint8_t kWatchKeyUpdated = 0;
inline constexpr uint8_t kWatchKeyCreated = 1;
inline constexpr uint8_t kWatchKeyDeleted = 2;
inline constexpr uint8_t kWatchCallbackRegistered = 3;
inline constexpr uint8_t kWatchKeyAppended = 4;

// Bounds checked before anything is allocated. Defaults are above torch libuv's
// (8 KiB keys, 8 MiB values, 131072 keys per request).
struct Limits {
  uint64_t max_key_bytes = 64 * 1024;
  uint64_t max_value_bytes = 64 * 1024 * 1024;
  uint64_t max_keys_per_request = 131072;
  // Bound on one whole request (the input buffer never holds more than one plus
  // a read).
  uint64_t max_request_bytes = 256 * 1024 * 1024;
  // Pending output above which the connection stops reading new requests.
  uint64_t output_soft_limit_bytes = 4 * 1024 * 1024;
  // Pending output above which the connection is closed: a peer that never
  // reads, or a reply (MULTI_GET naming a large key many times) that alone would
  // pass it, refused from its size before it is built.
  uint64_t output_hard_limit_bytes = 512 * 1024 * 1024;
  // Keys and values the whole store may hold (--store-max-bytes): a client whose write
  // would pass it is disconnected with an error in the log. torch keeps small values
  // there (a counter, an address, a 128-byte NCCL id per process group, per rank at
  // most a few keys), so a job of 100,000 ranks stays far below 1 GiB; what reaches it
  // is a program using the store as a blob store, which would take the node's memory.
  uint64_t max_store_bytes = uint64_t{1} << 30;
};

// Little-endian encoders (torch dumps host-order integers; every platform is
// LE).
void AppendU8(std::string* out, uint8_t v);
void AppendU32(std::string* out, uint32_t v);
void AppendU64(std::string* out, uint64_t v);
void AppendI64(std::string* out, int64_t v);
// u64 length + bytes.
void AppendString(std::string* out, std::string_view s);

uint32_t LoadU32(const char* p);
uint64_t LoadU64(const char* p);

}  // namespace muster::c10d

#endif  // MUSTER_RENDEZVOUS_C10D_WIRE_H_
