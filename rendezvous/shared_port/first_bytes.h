// Tells the two protocols that share a job's port apart (docs/design.md §4.3 "Ports") by the first
// bytes of a new connection. A gRPC client opens with HTTP/2's fixed client preface
// (RFC 9113 §3.4: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); a TCPStore client opens with a
// one-byte opcode: 0..0x14 in every torch generation, VALIDATE (0) for torch 2.4+
// (reference/torch_contract.md §1.2). No opcode is 'P' (0x50), so one byte other than 'P'
// decides for the store, and 24 bytes decide for HTTP/2. Pure functions; thread-safe.
#ifndef MUSTER_RENDEZVOUS_SHARED_PORT_FIRST_BYTES_H_
#define MUSTER_RENDEZVOUS_SHARED_PORT_FIRST_BYTES_H_

#include <string_view>

namespace muster::shared_port {

inline constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

enum class Protocol {
  kUndecided,  // nothing yet, or a proper beginning of the HTTP/2 preface: read more
  kHttp2,      // the whole preface: a gRPC client
  kStore,      // anything else: a TCPStore client (the store closes what it cannot parse)
};

// What a connection speaks, judged from the bytes it has sent so far (not consumed).
Protocol ClassifyFirstBytes(std::string_view received);

// What a connection that has sent only `received` when its time to speak ran out is
// handed to: kStore for silence (torch 1.13 opens a second store connection that sends
// nothing), kUndecided for a preface cut short (neither protocol: close it).
Protocol ClassifyAtDeadline(std::string_view received);

const char* ProtocolName(Protocol p);

}  // namespace muster::shared_port

#endif  // MUSTER_RENDEZVOUS_SHARED_PORT_FIRST_BYTES_H_
