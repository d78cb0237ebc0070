// HTTP/2 (RFC 9113) and HPACK (RFC 7541) encoding of what a gRPC client sends, and a
// streaming reader of the RoundStarted message, for bench/helpers/rdzv_h2load.cc (a B2 load
// generator that speaks gRPC's wire protocol by hand). Plain functions and one class without
// shared state; header-only so rdzv_h2load stays one file to build and h2_wire_test.cc
// tests these pieces alone.
#ifndef MUSTER_BENCH_HELPERS_H2_WIRE_H_
#define MUSTER_BENCH_HELPERS_H2_WIRE_H_

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>

#include "muster/v1/rendezvous.pb.h"

namespace muster::bench {

// ---- HTTP/2 (RFC 9113) and HPACK (RFC 7541) encoding: only what a gRPC client sends ----

enum FrameType : uint8_t {
  kData = 0,
  kHeaders = 1,
  kRstStream = 3,
  kSettings = 4,
  kPushPromise = 5,
  kPing = 6,
  kGoaway = 7,
  kWindowUpdate = 8,
};
inline constexpr uint8_t kFlagEndStream = 0x1;  // DATA, HEADERS
inline constexpr uint8_t kFlagAck = 0x1;        // SETTINGS, PING
inline constexpr uint8_t kFlagEndHeaders = 0x4;
inline constexpr uint8_t kFlagPadded = 0x8;
inline constexpr uint32_t kStream = 1;              // each agent's one Session call
inline constexpr uint32_t kMaxFrameSize = 4194303;  // what gRPC's client announces
inline constexpr uint32_t kDefaultWindow = 65535;   // RFC 9113 §6.9.2
inline constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

inline void AppendU32(uint32_t v, std::string* out) {
  out->push_back(static_cast<char>(v >> 24));
  out->push_back(static_cast<char>(v >> 16));
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

inline void AppendFrameHeader(uint32_t length, FrameType type, uint8_t flags, uint32_t stream,
                              std::string* out) {
  out->push_back(static_cast<char>(length >> 16));
  out->push_back(static_cast<char>(length >> 8));
  out->push_back(static_cast<char>(length));
  out->push_back(static_cast<char>(type));
  out->push_back(static_cast<char>(flags));
  AppendU32(stream, out);
}

inline void AppendWindowUpdate(uint32_t stream, uint32_t increment, std::string* out) {
  AppendFrameHeader(4, kWindowUpdate, 0, stream, out);
  AppendU32(increment, out);
}

// An HPACK string literal, not Huffman-coded: length with a 7-bit prefix, then the bytes.
inline void AppendHpackString(const std::string& s, std::string* out) {
  uint64_t n = s.size();
  if (n < 127) {
    out->push_back(static_cast<char>(n));
  } else {
    out->push_back(static_cast<char>(127));
    for (n -= 127; n >= 128; n >>= 7) out->push_back(static_cast<char>((n & 0x7f) | 0x80));
    out->push_back(static_cast<char>(n));
  }
  *out += s;
}

// "Literal Header Field without Indexing -- New Name" (RFC 7541 §6.2.2): the server's
// decoder keeps no state for it.
inline void AppendHpackLiteral(const std::string& name, const std::string& value,
                               std::string* out) {
  out->push_back('\0');
  AppendHpackString(name, out);
  AppendHpackString(value, out);
}

// The preface and the SETTINGS that gRPC 1.51's client sends (captured from rdzv_load), so
// that the server treats both clients' connections alike; `window` is the receive window.
inline std::string ClientPreface(uint32_t window) {
  const std::pair<uint16_t, uint32_t> settings[] = {
      {0x2, 0},              // ENABLE_PUSH
      {0x3, 0},              // MAX_CONCURRENT_STREAMS (the server opens none)
      {0x4, window},         // INITIAL_WINDOW_SIZE
      {0x5, kMaxFrameSize},  // MAX_FRAME_SIZE
      {0x6, 8192},           // MAX_HEADER_LIST_SIZE
      {0xfe03, 1},           // gRPC's GRPC_ALLOW_TRUE_BINARY_METADATA
  };
  std::string out(kPreface, sizeof kPreface - 1);
  AppendFrameHeader(6 * std::size(settings), kSettings, 0, 0, &out);
  for (const auto& [id, value] : settings) {
    out.push_back(static_cast<char>(id >> 8));
    out.push_back(static_cast<char>(id));
    AppendU32(value, &out);
  }
  if (window > kDefaultWindow) AppendWindowUpdate(0, window - kDefaultWindow, &out);
  return out;
}

// A DATA frame on the agent's stream carrying one gRPC length-prefixed message.
inline void AppendGrpcMessage(const muster::v1::AgentMessage& msg, bool end_stream,
                              std::string* out) {
  std::string body = msg.SerializeAsString();
  AppendFrameHeader(static_cast<uint32_t>(5 + body.size()), kData, end_stream ? kFlagEndStream : 0,
                    kStream, out);
  out->push_back(0);  // not compressed
  AppendU32(static_cast<uint32_t>(body.size()), out);
  *out += body;
}

// ---- RoundStarted, read as it arrives ----

// What the self-check needs from an Assignment; proto3 defaults (a 0 is not on the wire).
struct Assigned {
  int64_t round = 0, group_rank = 0, group_world_size = 0, rank_base = 0, world_size = 0;
  int64_t nodes = 0;
};

// Walks the protobuf wire format of a ServerMessage{round_started{assignment}} fed in
// chunks, keeping only the Assignment's scalars and counting (skipping) its nodes, so a
// 256-node assignment (~12 KB) is neither buffered nor parsed into 256 NodeInfos. Field numbers
// are those of proto/muster/v1/rendezvous.proto.
class RoundStartedScan {
 public:
  void Reset(uint64_t size) {
    *this = RoundStartedScan();
    left_[0] = size;
  }

  // False on malformed input (see error()).
  bool Feed(const uint8_t* p, size_t n) {
    while (n > 0) {
      if (state_ == kSkip) {
        size_t k = static_cast<size_t>(std::min<uint64_t>(n, skip_));
        p += k;
        n -= k;
        skip_ -= k;
        if (skip_ == 0) EndField();
        continue;
      }
      if (left_[depth_] == 0) return Fail("a field runs past the end of its message");
      uint8_t b = *p++;
      --n;
      --left_[depth_];
      if (shift_ > 63) return Fail("varint longer than 10 bytes");
      acc_ |= static_cast<uint64_t>(b & 0x7f) << shift_;
      shift_ += 7;
      if (b & 0x80) continue;
      uint64_t v = acc_;
      acc_ = 0;
      shift_ = 0;
      if (state_ == kTag) {
        field_ = v >> 3;
        switch (v & 7) {
          case 0:
            state_ = kVarint;
            break;
          case 1:
            if (!StartSkip(8)) return false;
            break;
          case 2:
            state_ = kLength;
            break;
          case 5:
            if (!StartSkip(4)) return false;
            break;
          default:
            return Fail("unsupported wire type");
        }
        if (field_ == 0) return Fail("field number 0");
      } else if (state_ == kVarint) {
        if (depth_ == 2) Record(field_, static_cast<int64_t>(static_cast<int32_t>(v)));
        EndField();
      } else if (v > left_[depth_]) {  // kLength
        return Fail("a length runs past the end of its message");
      } else if ((depth_ == 0 && field_ == 2) || (depth_ == 1 && field_ == 1)) {
        // ServerMessage.round_started, RoundStarted.assignment: go in.
        if (depth_ == 0) round_started_ = true;
        if (depth_ == 1) assignment_ = true;
        left_[depth_] -= v;
        left_[++depth_] = v;
        EndField();
      } else {
        if (depth_ == 2 && field_ == 9) ++out_.nodes;  // Assignment.nodes
        if (!StartSkip(v)) return false;
      }
    }
    return true;
  }

  // The whole message was fed and it was a RoundStarted with an Assignment.
  bool Complete() const {
    return depth_ == 0 && left_[0] == 0 && state_ == kTag && shift_ == 0 && round_started_ &&
           assignment_;
  }
  const Assigned& assigned() const { return out_; }
  const std::string& error() const { return error_; }

 private:
  enum State { kTag, kVarint, kLength, kSkip };

  void Record(uint64_t field, int64_t v) {
    switch (field) {
      case 1:
        out_.round = v;
        break;
      case 3:
        out_.group_rank = v;
        break;
      case 4:
        out_.group_world_size = v;
        break;
      case 5:
        out_.rank_base = v;
        break;
      case 6:
        out_.world_size = v;
        break;
      default:
        break;
    }
  }

  bool StartSkip(uint64_t n) {
    if (n > left_[depth_]) return Fail("a field runs past the end of its message");
    left_[depth_] -= n;
    skip_ = n;
    state_ = kSkip;
    if (n == 0) EndField();
    return true;
  }

  // Next: a tag, in the innermost message that still has bytes.
  void EndField() {
    state_ = kTag;
    while (depth_ > 0 && left_[depth_] == 0) --depth_;
  }

  bool Fail(const char* why) {
    error_ = why;
    return false;
  }

  int depth_ = 0;          // 0 ServerMessage, 1 RoundStarted, 2 Assignment
  uint64_t left_[3] = {};  // bytes of each open message not yet read or handed to a child
  State state_ = kTag;
  uint64_t acc_ = 0;
  int shift_ = 0;
  uint64_t field_ = 0;
  uint64_t skip_ = 0;
  bool round_started_ = false, assignment_ = false;
  Assigned out_;
  std::string error_;
};

}  // namespace muster::bench

#endif  // MUSTER_BENCH_HELPERS_H2_WIRE_H_
