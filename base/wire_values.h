// WireValues: checks for the values that muster hands to other processes, applied where they
// enter (flags, environment) so that a bad one is refused there, naming the flag or variable,
// instead of failing far away. The run id, host names and addresses travel in the
// rendezvous protocol's proto3 `string` fields, which must be valid UTF-8: a receiver cannot
// parse a message holding anything else (the server would drop the Join as unparsable).
// The token travels in gRPC metadata, which takes printable ASCII only.
// Thread-safe (pure functions).
#ifndef MUSTER_BASE_WIRE_VALUES_H_
#define MUSTER_BASE_WIRE_VALUES_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace muster {

// Longest run id accepted: it also names a directory (<run_id>_XXXXXX under the log root).
inline constexpr size_t kMaxRunIdBytes = 128;

// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF): what protobuf requires of a proto3 `string`.
bool IsValidUtf8(std::string_view text);

// `text` with every byte that is not printable ASCII written as \xNN: shows a bad value in
// an error message without writing the bad bytes to the terminal.
std::string EscapeForMessage(std::string_view text);

// --rdzv-id: non-empty valid UTF-8 of at most kMaxRunIdBytes, no control characters and no
// '/'. `where` is the flag or variable it came from.
absl::Status CheckRunId(std::string_view where, std::string_view id);

// A host name or IP address (--local-addr, POD_IP, --master-addr, the rendezvous endpoint's
// host): 1..255 characters from letters, digits, '.', '-', '_', ':' and '%', with ':' only in
// an IPv6 address (and '%' its zone).
absl::Status CheckHostOrAddress(std::string_view where, std::string_view host);

// The shared secret (MUSTER_TOKEN, --token-file): printable ASCII, as gRPC metadata needs.
absl::Status CheckToken(std::string_view where, std::string_view token);

// `text` with every byte that is not part of well-formed UTF-8 written as \xNN, the rest
// unchanged: for text that goes into a proto3 string but comes from outside (a command's
// path in "cannot execute ...", a worker's error message).
std::string ToValidUtf8(std::string_view text);

// This machine's hostname as it may go on the wire: unchanged when it is valid UTF-8 without
// control characters, else EscapeForMessage(hostname) (the kernel accepts any bytes).
std::string WireHostname(std::string_view hostname);

}  // namespace muster

#endif  // MUSTER_BASE_WIRE_VALUES_H_
