// Incremental decoder for TCPStore requests: protocol detection on a
// connection's first bytes, then one request at a time from a byte buffer that
// may hold a partial request, exactly one, or several. Every length and count
// is checked against Limits before any allocation. Stateless functions;
// thread-compatible.
#ifndef MUSTER_RENDEZVOUS_C10D_REQUEST_PARSER_H_
#define MUSTER_RENDEZVOUS_C10D_REQUEST_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "rendezvous/c10d/wire.h"

namespace muster::c10d {

// One decoded request. Field use per op:
//   keys:   the key of single-key ops; all keys of
//   CHECK/WAIT/MULTI_GET/MULTI_SET. values: SET/APPEND/QUEUE_PUSH value;
//   COMPARE_SET {expected, desired}; MULTI_SET values. number: ADD delta,
//   BARRIER world size.   nonce: PING.
struct Request {
  Op op = Op::kGetNumKeys;
  std::vector<std::string> keys;
  std::vector<std::string> values;
  int64_t number = 0;
  uint32_t nonce = 0;
};

struct Detection {
  Protocol protocol = Protocol::kUnknown;  // kUnknown: need more bytes
  size_t consumed = 0;                     // 5 for the modern VALIDATE, else 0
};

// contract §5.1.2: `00 CE F7 85 3C` means modern (VALIDATE consumed, no reply);
// anything else is legacy. A first byte other than 0 decides at once (legacy
// GETNUMKEYS is 1 byte).
Detection DetectProtocol(std::string_view buffer);

struct ParseOutcome {
  bool complete = false;
  // complete: bytes the request occupied. Incomplete: the total buffer size
  // below which another attempt cannot succeed (lets the caller skip re-parsing
  // on every read).
  size_t size = 0;
};

// Decodes the first request of `buffer`. InvalidArgument for an unknown opcode,
// a VALIDATE after detection, or a length/count over `limits`; the connection
// must then be closed.
absl::StatusOr<ParseOutcome> ParseRequest(Protocol protocol, std::string_view buffer,
                                          const Limits& limits, Request* request);

}  // namespace muster::c10d

#endif  // MUSTER_RENDEZVOUS_C10D_REQUEST_PARSER_H_
