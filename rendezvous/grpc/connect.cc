#include "rendezvous/grpc/connect.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/unique_fd.h"
#include "rendezvous/grpc/credentials.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv::grpc_internal {
namespace {

constexpr absl::Duration kInitialBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(2);
// One connection attempt may take this long before it counts as failed.
constexpr absl::Duration kAttemptTimeout = absl::Seconds(5);
// Stop requests are noticed at least this often while a connection attempt runs.
constexpr absl::Duration kStopCheck = absl::Milliseconds(200);
constexpr absl::Duration kLogEvery = absl::Seconds(10);

std::string Secs(absl::Duration d) { return absl::StrCat(absl::ToInt64Seconds(d), " s"); }

// Empty when `host` resolves; the resolver's complaint otherwise. Checked here rather than
// left to gRPC so the log says "does not resolve" instead of a generic connect failure.
std::string ResolveProblem(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc == 0) {
    freeaddrinfo(result);
    return "";
  }
  return absl::StrCat("host ", host, " does not resolve (yet): ", gai_strerror(rc));
}

// Whether a plain TCP connection to host:port comes up within `timeout`. Used only to
// explain a failed gRPC connection: a port that accepts TCP but gives no gRPC session is
// almost always a TLS mismatch, which gRPC itself reports only as a generic failure.
bool TcpReachable(const Endpoint& endpoint, absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  std::string port = std::to_string(endpoint.port);
  if (getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &result) != 0) return false;
  bool reachable = false;
  for (addrinfo* a = result; a != nullptr && !reachable; a = a->ai_next) {
    UniqueFd fd(
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) continue;
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) {
      reachable = true;
      break;
    }
    if (errno != EINPROGRESS) continue;
    pollfd p{.fd = fd.get(), .events = POLLOUT, .revents = 0};
    if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) continue;
    int err = 0;
    socklen_t len = sizeof(err);
    reachable = ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
  }
  freeaddrinfo(result);
  return reachable;
}

// Why a port that accepts TCP gives no gRPC session.
std::string HandshakeProblem(const Endpoint& endpoint) {
  return absl::StrCat(
      "port ", endpoint.port, " of ", endpoint.host,
      " accepts TCP connections but no gRPC session comes up: a TLS mismatch (the server has "
      "--tls-cert and this side no --tls-ca, or the reverse, or --tls-ca is not the CA that "
      "signed the server's certificate) or not a muster rendezvous server");
}

// Empty once `channel` is connected; why not otherwise.
std::string WaitConnected(grpc::Channel& channel, absl::Time deadline,
                          const InterruptibleSleep& sleep, bool* stopped) {
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      return "connection refused or failed";
    }
    absl::Time now = absl::Now();
    if (now >= deadline) return absl::StrCat("no connection within ", Secs(kAttemptTimeout));
    if (!channel.WaitForStateChange(state,
                                    absl::ToChronoTime(std::min(deadline, now + kStopCheck)))) {
      if (!sleep(absl::ZeroDuration())) {
        *stopped = true;
        return "stopped";
      }
    }
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return "";
}

}  // namespace

absl::StatusOr<Endpoint> ParseDialTarget(const std::string& endpoint) {
  ASSIGN_OR_RETURN(Endpoint parsed, ParseEndpoint("rendezvous endpoint", endpoint, 0));
  if (parsed.port == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous endpoint '", endpoint, "' has no port; write HOST:PORT or [ADDR]:PORT"));
  }
  return parsed;
}

absl::Status CheckDialTarget(const Endpoint& endpoint) {
  if (endpoint.host.empty()) return absl::InvalidArgumentError("rendezvous endpoint: no host");
  if (endpoint.port <= 0 || endpoint.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous endpoint '", endpoint.ToString(),
                     "' has no port; write HOST:PORT or [ADDR]:PORT"));
  }
  return absl::OkStatus();
}

std::string ExplainNoAnswer(const Endpoint& endpoint) {
  if (absl::Status dialable = CheckDialTarget(endpoint); !dialable.ok()) {
    return std::string(dialable.message());
  }
  if (std::string problem = ResolveProblem(endpoint.host); !problem.empty()) return problem;
  if (TcpReachable(endpoint, absl::Seconds(1))) {
    return HandshakeProblem(endpoint);
  }
  return absl::StrCat("nothing accepts connections on port ", endpoint.port, " of ", endpoint.host);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectWithBackoff(
    const Endpoint& endpoint, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    absl::Time started, absl::Time deadline, const InterruptibleSleep& sleep,
    absl::Duration keepalive_time, absl::Duration keepalive_timeout) {
  RETURN_IF_ERROR(CheckDialTarget(endpoint));
  const std::string target = endpoint.ToString();  // gRPC's words for it
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  absl::Duration backoff = kInitialBackoff;
  absl::Time last_log = absl::InfinitePast();
  int attempts = 0;
  while (true) {
    ++attempts;
    std::string reason = ResolveProblem(endpoint.host);
    if (reason.empty()) {
      std::shared_ptr<grpc::Channel> channel =
          MakeChannel(target, creds, keepalive_time, keepalive_timeout);
      bool stopped = false;
      reason = WaitConnected(*channel, std::min(deadline, absl::Now() + kAttemptTimeout), sleep,
                             &stopped);
      if (stopped) return absl::CancelledError("stopped while connecting to the rendezvous");
      if (!reason.empty() && TcpReachable(endpoint, absl::Seconds(1))) {
        reason = HandshakeProblem(endpoint);
      }
      if (reason.empty()) {
        if (attempts > 1) {
          spdlog::info("rendezvous at {} reached after {}", target, Secs(absl::Now() - started));
        }
        return channel;
      }
    }
    absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::UnavailableError(absl::StrCat("rendezvous at ", target, " not reachable within ",
                                                 Secs(deadline - started), ": ", reason));
    }
    if (now - last_log >= kLogEvery) {
      spdlog::info("waiting for rendezvous at {} ({}), {} of {}", target, reason,
                   Secs(now - started), Secs(deadline - started));
      last_log = now;
    } else {
      spdlog::debug("rendezvous at {}: attempt {} failed: {}", target, attempts, reason);
    }
    absl::Duration pause = std::min(backoff * jitter(rng), deadline - now);
    if (!sleep(pause)) return absl::CancelledError("stopped while connecting to the rendezvous");
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

}  // namespace muster::rdzv::grpc_internal
