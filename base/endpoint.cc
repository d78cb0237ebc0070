#include "base/endpoint.h"

#include <arpa/inet.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/wire_values.h"

namespace muster {
namespace {

absl::Status Invalid(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(absl::string_view(where.data(), where.size()),
                                                 ": ",
                                                 absl::string_view(what.data(), what.size())));
}

bool IsIpv6Address(std::string_view text) {
  in6_addr v6;
  std::string address(text.substr(0, text.find('%')));  // a zone (%eth0) is not part of it
  return inet_pton(AF_INET6, address.c_str(), &v6) == 1;
}

// Splits `text` into host and port text (empty when none is written).
absl::Status Split(std::string_view where, const std::string& text, std::string* host,
                   std::string* port) {
  *host = text;
  if (!text.empty() && text[0] == '[') {  // [v6] or [v6]:port
    size_t close = text.find(']');
    if (close == std::string::npos) {
      return Invalid(where, absl::StrCat("'", text, "': missing ']' after the IPv6 address"));
    }
    *host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') {
        return Invalid(where, absl::StrCat("'", text, "': expected :PORT after ']'"));
      }
      *port = text.substr(close + 2);
    }
    return absl::OkStatus();
  }
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) return absl::OkStatus();
  if (text.find(':') == colon) {  // host:port
    *host = text.substr(0, colon);
    *port = text.substr(colon + 1);
    return absl::OkStatus();
  }
  // Several colons without brackets: only an IPv6 address ("host:1:2" is no endpoint).
  if (!IsIpv6Address(text)) {
    return Invalid(where, absl::StrCat("'", EscapeForMessage(text),
                                       "' is not HOST[:PORT]; write an IPv6 address "
                                       "with a port as [ADDR]:PORT"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string Endpoint::ToString() const { return JoinHostPort(host, port); }

absl::StatusOr<Endpoint> ParseEndpoint(std::string_view where, std::string_view text_view,
                                       int default_port, PortZero zero) {
  std::string text(text_view);
  Endpoint out{.host = "", .port = default_port};
  std::string port_text;
  RETURN_IF_ERROR(Split(where, text, &out.host, &port_text));
  if (out.host.empty()) {
    return Invalid(where, absl::StrCat("'", text, "' has no host; write HOST[:PORT]"));
  }
  RETURN_IF_ERROR(CheckHostOrAddress(where, out.host));
  // "host:" names a port as much as "host:1" does: an empty one is an error, not the default.
  if (!port_text.empty() || text.back() == ':') {
    const int lowest = zero == PortZero::kAnyFreePort ? 0 : 1;
    if (!absl::SimpleAtoi(port_text, &out.port) || out.port < lowest || out.port > 65535) {
      return Invalid(where, absl::StrCat("'", text, "': '", port_text, "' is not a port (", lowest,
                                         "..65535); write HOST[:PORT]"));
    }
  }
  return out;
}

std::string JoinHostPort(std::string_view host, std::string_view port) {
  absl::string_view h(host.data(), host.size()), p(port.data(), port.size());
  bool bracket = host.find(':') != std::string_view::npos && host.front() != '[';
  return bracket ? absl::StrCat("[", h, "]:", p) : absl::StrCat(h, ":", p);
}

std::string JoinHostPort(std::string_view host, int port) {
  return JoinHostPort(host, std::to_string(port));
}

}  // namespace muster
