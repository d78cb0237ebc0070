#include "rendezvous/c10d/request_parser.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace muster::c10d {
namespace {

// Reads fields from the front of a buffer. A read past the end returns false
// and records how many bytes the buffer would need; limit violations are
// errors.
class Cursor {
 public:
  Cursor(std::string_view buffer, const Limits& limits) : buffer_(buffer), limits_(limits) {}

  size_t position() const { return pos_; }
  size_t needed() const { return needed_; }

  bool Has(uint64_t n) {
    if (buffer_.size() - pos_ >= n) return true;
    needed_ = pos_ + n;
    return false;
  }
  bool U8(uint8_t* v) {
    if (!Has(1)) return false;
    *v = static_cast<uint8_t>(buffer_[pos_++]);
    return true;
  }
  bool U32(uint32_t* v) {
    if (!Has(4)) return false;
    *v = LoadU32(buffer_.data() + pos_);
    pos_ += 4;
    return true;
  }
  bool U64(uint64_t* v) {
    if (!Has(8)) return false;
    *v = LoadU64(buffer_.data() + pos_);
    pos_ += 8;
    return true;
  }
  // Reads `u64 len + bytes` with len checked against `max` before anything is
  // copied.
  absl::StatusOr<bool> String(uint64_t max, const char* what, std::string* out) {
    uint64_t len = 0;
    if (!U64(&len)) return false;
    if (len > max) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " length ", len, " exceeds limit ", max));
    }
    if (pos_ + len > limits_.max_request_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("request exceeds ", limits_.max_request_bytes, " bytes"));
    }
    if (!Has(len)) return false;
    out->assign(buffer_.data() + pos_, len);
    pos_ += len;
    return true;
  }
  absl::StatusOr<bool> Count(uint64_t* n) {
    if (!U64(n)) return false;
    if (*n > limits_.max_keys_per_request) {
      return absl::InvalidArgumentError(
          absl::StrCat("key count ", *n, " exceeds limit ", limits_.max_keys_per_request));
    }
    return true;
  }

 private:
  std::string_view buffer_;
  const Limits& limits_;
  size_t pos_ = 0;
  size_t needed_ = 0;
};

// Shorthands: propagate errors, and return "incomplete" from the parser on
// short input.
#define READ_OR_NEED(cursor, call)                                  \
  do {                                                              \
    ASSIGN_OR_RETURN(bool muster_ok_, (call));                      \
    if (!muster_ok_) return ParseOutcome{false, (cursor).needed()}; \
  } while (0)
#define FIXED_OR_NEED(cursor, call)  \
  if (!(call)) return ParseOutcome { \
      false, (cursor).needed()       \
    }

}  // namespace

Detection DetectProtocol(std::string_view buffer) {
  if (buffer.empty()) return {};
  if (buffer[0] != 0) return {Protocol::kLegacy, 0};
  if (buffer.size() < 5) return {};
  if (LoadU32(buffer.data() + 1) == kValidationMagic) return {Protocol::kModern, 5};
  return {Protocol::kLegacy, 0};
}

absl::StatusOr<ParseOutcome> ParseRequest(Protocol protocol, std::string_view buffer,
                                          const Limits& limits, Request* request) {
  Cursor c(buffer, limits);
  uint8_t opcode = 0;
  FIXED_OR_NEED(c, c.U8(&opcode));
  std::optional<Op> op = DecodeOpcode(protocol, opcode);
  if (!op.has_value() || *op == Op::kValidate) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected opcode ", opcode, " on a ",
                     protocol == Protocol::kModern ? "modern" : "legacy", " connection"));
  }
  request->op = *op;
  request->keys.clear();
  request->values.clear();
  request->number = 0;
  request->nonce = 0;
  const uint64_t kmax = limits.max_key_bytes;
  const uint64_t vmax = limits.max_value_bytes;
  auto key = [&]() -> absl::StatusOr<bool> {
    return c.String(kmax, "key", &request->keys.emplace_back());
  };
  auto value = [&]() -> absl::StatusOr<bool> {
    return c.String(vmax, "value", &request->values.emplace_back());
  };
  switch (*op) {
    case Op::kValidate:
      break;  // rejected above
    case Op::kGetNumKeys:
    case Op::kCancelWait:
    case Op::kListKeys:
      break;
    case Op::kPing:
      FIXED_OR_NEED(c, c.U32(&request->nonce));
      break;
    case Op::kGet:
    case Op::kWatchKey:
    case Op::kDeleteKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      READ_OR_NEED(c, key());
      break;
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      READ_OR_NEED(c, key());
      READ_OR_NEED(c, value());
      break;
    case Op::kCompareSet:
      READ_OR_NEED(c, key());
      READ_OR_NEED(c, value());
      READ_OR_NEED(c, value());
      break;
    case Op::kAdd:
    case Op::kBarrier: {
      READ_OR_NEED(c, key());
      uint64_t n = 0;
      FIXED_OR_NEED(c, c.U64(&n));
      request->number = static_cast<int64_t>(n);
      break;
    }
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
    case Op::kMultiSet: {
      uint64_t n = 0;
      READ_OR_NEED(c, c.Count(&n));
      // Reserve from the checked count only; each element is still
      // length-checked.
      request->keys.reserve(std::min<uint64_t>(n, 1024));
      if (*op == Op::kMultiSet) request->values.reserve(std::min<uint64_t>(n, 1024));
      for (uint64_t i = 0; i < n; ++i) {
        READ_OR_NEED(c, key());
        if (*op == Op::kMultiSet) READ_OR_NEED(c, value());
      }
      break;
    }
  }
  return ParseOutcome{true, c.position()};
}

}  // namespace muster::c10d
