#include "base/wire_values.h"

#include <arpa/inet.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace muster {
namespace {

// The code points of `text`, or nullopt when it is not well-formed UTF-8.
std::optional<std::vector<uint32_t>> DecodeUtf8(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
    uint8_t b0 = byte(i);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0, min = 0;
    if ((b0 & 0xE0) == 0xC0) {
      len = 2, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, cp = b0 & 0x07, min = 0x10000;
    } else {
      return std::nullopt;  // a continuation byte, or 0xF8..0xFF
    }
    if (i + len > text.size()) return std::nullopt;
    for (int k = 1; k < len; ++k) {
      uint8_t b = byte(i + k);
      if ((b & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (b & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and values past Unicode are not UTF-8.
    if (cp < min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return std::nullopt;
    out.push_back(cp);
    i += len;
  }
  return out;
}

// C0, DEL and C1 controls: a terminal or log reader would act on them.
bool IsControl(uint32_t cp) { return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F); }

absl::Status Invalid(std::string_view where, std::string_view text, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(absl::string_view(where.data(), where.size()),
                                                 ": '", EscapeForMessage(text), "' ",
                                                 absl::string_view(what.data(), what.size())));
}

}  // namespace

bool IsValidUtf8(std::string_view text) { return DecodeUtf8(text).has_value(); }

std::string EscapeForMessage(std::string_view text) {
  std::string out;
  for (char ch : text) {
    auto b = static_cast<uint8_t>(ch);
    if (b >= 0x20 && b < 0x7F && ch != '\\') {
      out.push_back(ch);
    } else {
      absl::StrAppendFormat(&out, "\\x%02X", b);
    }
  }
  return out;
}

absl::Status CheckRunId(std::string_view where, std::string_view id) {
  constexpr absl::string_view kFix = "; use letters, digits, '-', '_' or '.', e.g. --rdzv-id job7";
  if (id.empty()) return Invalid(where, id, absl::StrCat("is empty", kFix));
  std::optional<std::vector<uint32_t>> cps = DecodeUtf8(id);
  if (!cps) {
    return Invalid(where, id,
                   absl::StrCat("is not valid UTF-8 (the run id travels in the rendezvous "
                                "protocol's text fields)",
                                kFix));
  }
  for (uint32_t cp : *cps) {
    if (IsControl(cp)) {
      return Invalid(where, id, absl::StrCat("contains a control character", kFix));
    }
    if (cp == '/') {
      return Invalid(
          where, id,
          absl::StrCat("contains '/' (the run id names a directory under --log-dir)", kFix));
    }
  }
  if (id.size() > kMaxRunIdBytes) {
    return Invalid(
        where, id.substr(0, 32),
        absl::StrCat("... is ", id.size(), " bytes long; the limit is ", kMaxRunIdBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckHostOrAddress(std::string_view where, std::string_view host) {
  constexpr absl::string_view kFix =
      "a host name or IP address has only letters, digits, '.', '-', '_', ':' and '%'";
  if (host.empty()) return Invalid(where, host, absl::StrCat("is empty; ", kFix));
  if (host.size() > 255) {
    return Invalid(where, host.substr(0, 32),
                   absl::StrCat("... is ", host.size(),
                                " characters long; a host name has at "
                                "most 253"));
  }
  for (char ch : host) {
    if (!absl::ascii_isalnum(ch) && ch != '.' && ch != '-' && ch != '_' && ch != ':' && ch != '%') {
      return Invalid(where, host,
                     absl::StrCat("is not a host name or address: '", EscapeForMessage({&ch, 1}),
                                  "' is not allowed; ", kFix));
    }
  }
  // A colon only in an IPv6 address: "node0:29400" here is a port where none belongs.
  if (std::string_view::size_type colon = host.find(':'); colon != std::string_view::npos) {
    in6_addr v6;
    std::string address(host.substr(0, host.find('%')));
    if (inet_pton(AF_INET6, address.c_str(), &v6) != 1) {
      return Invalid(where, host,
                     "is neither a host name nor an IPv6 address; give the host without a "
                     ":PORT");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckToken(std::string_view where, std::string_view token) {
  for (char ch : token) {
    auto b = static_cast<uint8_t>(ch);
    if (b < 0x20 || b >= 0x7F) {
      return absl::InvalidArgumentError(absl::StrCat(
          absl::string_view(where.data(), where.size()),
          ": the token holds a byte that is not printable ASCII (0x", absl::Hex(b, absl::kZeroPad2),
          "); gRPC metadata carries printable ASCII only: use e.g. "
          "`openssl rand -hex 32`"));
    }
  }
  return absl::OkStatus();
}

std::string ToValidUtf8(std::string_view text) {
  if (DecodeUtf8(text)) return std::string(text);
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    // The longest prefix of the rest that is well-formed, then one escaped byte.
    size_t len = std::min<size_t>(4, text.size() - i);
    while (len > 0 && !DecodeUtf8(text.substr(i, len))) --len;
    if (len == 0) {
      absl::StrAppendFormat(&out, "\\x%02X", static_cast<uint8_t>(text[i]));
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string WireHostname(std::string_view hostname) {
  std::optional<std::vector<uint32_t>> cps = DecodeUtf8(hostname);
  bool clean = cps.has_value();
  for (size_t i = 0; clean && i < cps->size(); ++i) clean = !IsControl((*cps)[i]);
  return clean ? std::string(hostname) : EscapeForMessage(hostname);
}

}  // namespace muster
