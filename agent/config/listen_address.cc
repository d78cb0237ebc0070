#include "agent/config/listen_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/config/this_host.h"
#include "base/duration.h"
#include "base/endpoint.h"
#include "base/errno_status.h"
#include "base/status_macros.h"
#include "base/unique_fd.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

bool IsNumericAddress(const std::string& host) {
  in_addr v4;
  in6_addr v6;
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

std::string NumericText(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* addr =
      sa->sa_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  if (inet_ntop(sa->sa_family, addr, text, sizeof(text)) == nullptr) return "";
  return text;
}

// This host's interface addresses, for error messages.
std::string ThisHostsAddresses() {
  ifaddrs* addrs = nullptr;
  if (getifaddrs(&addrs) != 0) return "unknown";
  std::vector<std::string> out;
  for (ifaddrs* a = addrs; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    if (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6) continue;
    std::string text = NumericText(a->ifa_addr);
    if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
  }
  freeifaddrs(addrs);
  return absl::StrJoin(out, ", ");
}

// The addresses `host` resolves to, in getaddrinfo's order. Unavailable while it does not
// resolve (a Service's DNS record may appear late).
absl::StatusOr<std::vector<sockaddr_storage>> Resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    std::string why = rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc);
    return absl::UnavailableError(absl::StrCat("'", host, "' does not resolve: ", why));
  }
  std::vector<sockaddr_storage> out;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    sockaddr_storage s{};
    std::memcpy(&s, a->ai_addr, std::min<size_t>(a->ai_addrlen, sizeof(s)));
    out.push_back(s);
  }
  freeaddrinfo(found);
  if (out.empty()) return absl::UnavailableError(absl::StrCat("'", host, "' has no IP address"));
  return out;
}

absl::StatusOr<std::string> RouteFrom(const sockaddr_storage& to) {
  UniqueFd fd(socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  socklen_t len = to.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&to), len) != 0) {
    // ENETUNREACH: no route (yet); the caller retries.
    return absl::UnavailableError(absl::StrCat("no route to ",
                                               NumericText(reinterpret_cast<const sockaddr*>(&to)),
                                               ": ", strerror(errno)));
  }
  sockaddr_storage local{};
  socklen_t local_len = sizeof(local);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) {
    return ErrnoStatus("getsockname", errno);
  }
  return NumericText(reinterpret_cast<const sockaddr*>(&local));
}

// The route toward the rendezvous endpoint, retried with backoff (100 ms to 2 s) while its
// name does not resolve, until the join timeout.
absl::StatusOr<std::string> RouteToEndpoint(const Config& c, const ListenWaitFn& wait) {
  const std::string endpoint = JoinHostPort(c.rdzv_host_name, c.rdzv_port);
  const absl::Time started = absl::Now();
  const absl::Time deadline = started + c.join_timeout;
  absl::Duration backoff = absl::Milliseconds(100);
  absl::Time next_log = started;
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<std::string> local = RouteSourceAddress(c.rdzv_host_name, c.rdzv_port);
    if (local.ok() && attempt > 1) {
      spdlog::info("rendezvous at {} resolved after {}: this node's address is {}", endpoint,
                   HumanDuration(absl::Now() - started), *local);
    }
    if (local.ok() || !absl::IsUnavailable(local.status())) return local;
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "rendezvous at ", endpoint, " did not resolve within ", HumanDuration(c.join_timeout),
          " (", local.status().message(),
          "), so this node's address is unknown; check the name, or give --local-addr"));
    }
    if (now >= next_log) {
      spdlog::info(
          "waiting for rendezvous at {} to resolve, to find this node's address ({} of {}): {}; "
          "--local-addr or POD_IP skips this",
          endpoint, HumanDuration(absl::Seconds(absl::ToInt64Seconds(now - started))),
          HumanDuration(c.join_timeout), std::string(local.status().message()));
      next_log = now + absl::Seconds(10);
    }
    if (!wait(std::min(backoff, deadline - now))) {
      return absl::CancelledError("stopped while waiting for the rendezvous endpoint");
    }
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

}  // namespace

absl::StatusOr<std::string> LocalAddressOf(const std::string& where, const std::string& host) {
  if (host == "localhost") return std::string("127.0.0.1");
  std::vector<std::string> tried;
  if (IsNumericAddress(host)) {
    if (IsThisHost(host)) return host;
  } else {
    absl::StatusOr<std::vector<sockaddr_storage>> addrs = Resolve(host, 0);
    if (!addrs.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " ", addrs.status().message(),
                       "; give one of this host's addresses: ", ThisHostsAddresses()));
    }
    for (const sockaddr_storage& a : *addrs) {
      std::string text = NumericText(reinterpret_cast<const sockaddr*>(&a));
      if (IsThisHost(text)) return text;
      tried.push_back(text);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      where, " '", host, "'",
      tried.empty() ? "" : absl::StrCat(" (", absl::StrJoin(tried, ", "), ")"),
      " is not an address of this host, so nothing can listen there; give one of this host's "
      "addresses: ",
      ThisHostsAddresses()));
}

absl::StatusOr<std::string> RouteSourceAddress(const std::string& host, int port) {
  if (host == "localhost") return std::string("127.0.0.1");
  ASSIGN_OR_RETURN(std::vector<sockaddr_storage> addrs, Resolve(host, port));
  absl::Status last;
  for (const sockaddr_storage& a : addrs) {
    absl::StatusOr<std::string> local = RouteFrom(a);
    if (local.ok()) return local;
    last = local.status();
  }
  return last;
}

absl::StatusOr<std::string> ListenAddressFor(const Config& c, ListenPurpose purpose,
                                             const ListenWaitFn& wait) {
  const bool has_local = !c.local_addr.empty();
  if (purpose == ListenPurpose::kNode && has_local) {
    return LocalAddressOf(c.SourceOf("local-addr"), c.local_addr);
  }
  if (c.rdzv_host_name.empty()) return LocalAddressOf(c.SourceOf("master-addr"), c.master_addr);
  if (has_local) return LocalAddressOf(c.SourceOf("local-addr"), c.local_addr);
  if (c.static_rendezvous && c.node_rank == 0) {
    return LocalAddressOf(c.SourceOf("master-addr"), c.master_addr);
  }
  return RouteToEndpoint(c, wait);
}

absl::Status CheckServedEndpoint(const Config& c, const std::string& address) {
  const std::string& host = c.rdzv_host_name;
  if (host == "localhost") return absl::OkStatus();  // dialled as 127.0.0.1 or ::1 alike
  absl::StatusOr<std::vector<sockaddr_storage>> addrs = Resolve(host, c.rdzv_port);
  if (!addrs.ok()) return absl::OkStatus();  // the client waits for the name
  std::string elsewhere;
  for (const sockaddr_storage& a : *addrs) {
    std::string text = NumericText(reinterpret_cast<const sockaddr*>(&a));
    if (text == address) return absl::OkStatus();
    if (elsewhere.empty() && IsThisHost(text)) elsewhere = text;
  }
  if (elsewhere.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(c.SourceOf("rdzv-endpoint"), " ", host, " resolves on this host to ", elsewhere,
                   ", but this node listens on ", address, " (", c.SourceOf("local-addr"),
                   "), so the rendezvous it serves would not be reached there; name ", address,
                   " in the endpoint, or make ", host, " resolve to it (e.g. /etc/hosts)"));
}

std::string ListenEndpoint(const std::string& address, int port) {
  return JoinHostPort(address, port);
}

bool NeverServesStore(const Config& c) {
  return !c.rdzv_host_name.empty() && c.node_rank > 0 && c.min_nodes == c.max_nodes;
}

}  // namespace muster
