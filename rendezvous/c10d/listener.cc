#include "rendezvous/c10d/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/status_macros.h"

namespace muster::c10d {
namespace {

absl::StatusOr<BoundListener> BindAndListen(int family, const sockaddr* addr, socklen_t len) {
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  int one = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return ErrnoStatus("setsockopt(SO_REUSEADDR)", errno);
  }
  if (family == AF_INET6) {
    int zero = 0;  // dual-stack: IPv4 clients arrive as ::ffff:a.b.c.d
    if (::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) != 0) {
      return ErrnoStatus("setsockopt(IPV6_V6ONLY)", errno);
    }
  }
  if (::bind(fd.get(), addr, len) != 0) {
    // A port in use may be free after a restart (another incarnation still dying); absl
    // files EADDRINUSE as FailedPrecondition, which would read as permanent.
    if (errno == EADDRINUSE) return absl::UnavailableError("bind: address already in use");
    return ErrnoStatus("bind", errno);
  }
  if (::listen(fd.get(), ListenBacklog()) != 0) {
    // Two agents binding the same port at once (SO_REUSEADDR) both bind; the second to
    // listen gets EADDRINUSE: the same "port in use" as at bind.
    if (errno == EADDRINUSE) return absl::UnavailableError("listen: address already in use");
    return ErrnoStatus("listen", errno);
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    return ErrnoStatus("getsockname", errno);
  }
  BoundListener out;
  out.port = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                      : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  out.address = FormatPeer(&bound);
  out.fd = std::move(fd);
  return out;
}

absl::StatusOr<BoundListener> ListenV4(in_addr ip, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr = ip;
  addr.sin_port = htons(port);
  return BindAndListen(AF_INET, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
}

absl::StatusOr<BoundListener> ListenV6(in6_addr ip, uint16_t port) {
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = ip;
  addr.sin6_port = htons(port);
  return BindAndListen(AF_INET6, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
}

}  // namespace

int ListenBacklog() {
  std::ifstream in("/proc/sys/net/core/somaxconn");
  int value = 0;
  if (in >> value && value > 0) return value;
  return SOMAXCONN;
}

namespace {

absl::StatusOr<BoundListener> ListenOn(const std::string& address, uint16_t port) {
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) return ListenV4(v4, port);
  if (::inet_pton(AF_INET6, address.c_str(), &v6) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("store bind address is not a numeric IP: '", address, "'"));
  }
  absl::StatusOr<BoundListener> listener = ListenV6(v6, port);
  bool wildcard = std::memcmp(&v6, &in6addr_any, sizeof(v6)) == 0;
  // Hosts booted with ipv6.disable=1 fail socket() with EAFNOSUPPORT;
  // containers without an IPv6 address fail bind() with EADDRNOTAVAIL. Both
  // mean "use IPv4", as torch does.
  if (!listener.ok() && wildcard) {
    in_addr any{};
    any.s_addr = htonl(INADDR_ANY);
    absl::StatusOr<BoundListener> fallback = ListenV4(any, port);
    if (fallback.ok()) return fallback;
  }
  return listener;
}

}  // namespace

absl::StatusOr<BoundListener> Listen(const std::string& address, uint16_t port,
                                     std::string_view what) {
  absl::StatusOr<BoundListener> listener = ListenOn(address, port);
  if (listener.ok()) return listener;
  return absl::Status(listener.status().code(), absl::StrCat(std::string(what), " on ", address, " port ", port,
                                                             ": ", listener.status().message()));
}

std::string FormatPeer(const void* storage) {
  const auto* sa = static_cast<const sockaddr*>(storage);
  char text[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = static_cast<const sockaddr_in6*>(storage);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    return absl::StrCat("[", text, "]:", ntohs(in6->sin6_port));
  }
  if (sa->sa_family == AF_INET) {
    const auto* in4 = static_cast<const sockaddr_in*>(storage);
    ::inet_ntop(AF_INET, &in4->sin_addr, text, sizeof(text));
    return absl::StrCat(text, ":", ntohs(in4->sin_port));
  }
  return "unknown";
}

}  // namespace muster::c10d
