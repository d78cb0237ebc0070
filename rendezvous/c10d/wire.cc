#include "rendezvous/c10d/wire.h"

#include <array>
#include <cstring>

namespace muster::c10d {
namespace {

// Index = opcode byte. torch 1.13 (0..8) extended by the 2.1-era
// APPEND..CANCEL_WAIT.
constexpr std::array<Op, 13> kLegacyOps = {
    Op::kSet,      Op::kCompareSet, Op::kGet,       Op::kAdd,       Op::kCheck,
    Op::kWait,     Op::kGetNumKeys, Op::kWatchKey,  Op::kDeleteKey, Op::kAppend,
    Op::kMultiGet, Op::kMultiSet,   Op::kCancelWait};

// torch 2.6 .. 2.14 / main TCPStoreBackend.hpp.
constexpr std::array<Op, 19> kModernOps = {
    Op::kValidate, Op::kSet,      Op::kCompareSet, Op::kGet,       Op::kAdd,
    Op::kCheck,    Op::kWait,     Op::kGetNumKeys, Op::kDeleteKey, Op::kAppend,
    Op::kMultiGet, Op::kMultiSet, Op::kCancelWait, Op::kPing,      Op::kQueuePush,
    Op::kQueuePop, Op::kQueueLen, Op::kListKeys,   Op::kBarrier};

template <size_t N>
std::optional<uint8_t> Find(const std::array<Op, N>& table, Op op) {
  for (size_t i = 0; i < N; ++i) {
    if (table[i] == op) return static_cast<uint8_t>(i);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Op> DecodeOpcode(Protocol protocol, uint8_t opcode) {
  if (protocol == Protocol::kLegacy && opcode < kLegacyOps.size()) {
    return kLegacyOps[opcode];
  }
  if (protocol == Protocol::kModern && opcode < kModernOps.size()) {
    return kModernOps[opcode];
  }
  return std::nullopt;
}

std::optional<uint8_t> EncodeOpcode(Protocol protocol, Op op) {
  if (protocol == Protocol::kLegacy) return Find(kLegacyOps, op);
  if (protocol == Protocol::kModern) return Find(kModernOps, op);
  return std::nullopt;
}

void AppendU8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }

void AppendU32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 4);
}

void AppendU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(b, 8);
}

void AppendI64(std::string* out, int64_t v) { AppendU64(out, static_cast<uint64_t>(v)); }

void AppendString(std::string* out, std::string_view s) {
  AppendU64(out, s.size());
  out->append(s.data(), s.size());
}

uint32_t LoadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

uint64_t LoadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

const char* OpName(Op op) {
  switch (op) {
    case Op::kValidate:
      return "VALIDATE";
    case Op::kSet:
      return "SET";
    case Op::kCompareSet:
      return "COMPARE_SET";
    case Op::kGet:
      return "GET";
    case Op::kAdd:
      return "ADD";
    case Op::kCheck:
      return "CHECK";
    case Op::kWait:
      return "WAIT";
    case Op::kGetNumKeys:
      return "GETNUMKEYS";
    case Op::kWatchKey:
      return "WATCH_KEY";
    case Op::kDeleteKey:
      return "DELETE_KEY";
    case Op::kAppend:
      return "APPEND";
    case Op::kMultiGet:
      return "MULTI_GET";
    case Op::kMultiSet:
      return "MULTI_SET";
    case Op::kCancelWait:
      return "CANCEL_WAIT";
    case Op::kPing:
      return "PING";
    case Op::kQueuePush:
      return "QUEUE_PUSH";
    case Op::kQueuePop:
      return "QUEUE_POP";
    case Op::kQueueLen:
      return "QUEUE_LEN";
    case Op::kListKeys:
      return "LIST_KEYS";
    case Op::kBarrier:
      return "BARRIER";
  }
  return "?";
}

}  // namespace muster::c10d
