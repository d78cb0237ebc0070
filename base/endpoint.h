// Endpoint: a HOST[:PORT] as muster's flags write it (--rdzv-endpoint, muster status,
// muster serve --host) and as gRPC wants it back. One parser for every command, so that
// a bare IPv6 address means the same everywhere. Thread-safe (pure functions).
#ifndef MUSTER_BASE_ENDPOINT_H_
#define MUSTER_BASE_ENDPOINT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace muster {

struct Endpoint {
  std::string host;  // a name or an address, without brackets (IPv6 zone kept: fe80::1%eth0)
  int port = 0;

  // "host:port", or "[v6]:port" for an IPv6 address: what gRPC and people read.
  std::string ToString() const;
};

// Whether port 0 may be written: torchrun's "any free port" (`--rdzv-endpoint localhost:0`,
// meaningful where one node serves and every client is local), or refused.
enum class PortZero { kRefused, kAnyFreePort };

// Parses `text` as one of
//   host, host:port, ADDR4:port, [v6]:port, [v6], v6 (a bare IPv6 address: no port)
// with `default_port` where none is written. The host is checked with CheckHostOrAddress.
// Errors are InvalidArgument, start with `where` (the flag or variable the text came
// from) and say how to write it.
absl::StatusOr<Endpoint> ParseEndpoint(std::string_view where, std::string_view text,
                                       int default_port, PortZero zero = PortZero::kRefused);

// "host:port", bracketing `host` when it is an IPv6 address ("[::1]:29400"); a host given
// in brackets already ("[::]") is kept as it is.
std::string JoinHostPort(std::string_view host, std::string_view port);
std::string JoinHostPort(std::string_view host, int port);

}  // namespace muster

#endif  // MUSTER_BASE_ENDPOINT_H_
