#include "rendezvous/grpc/tcp_keepalive.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/grpc/server.h"

namespace muster::rdzv::grpc_internal {
namespace {

int GetInt(int fd, int level, int name) {
  int value = -1;
  socklen_t len = sizeof value;
  EXPECT_EQ(getsockopt(fd, level, name, &value, &len), 0) << std::strerror(errno);
  return value;
}

struct Keepalive {
  int on, idle, interval, user_timeout_ms;
};

Keepalive Read(int fd) {
  return {GetInt(fd, SOL_SOCKET, SO_KEEPALIVE), GetInt(fd, IPPROTO_TCP, TCP_KEEPIDLE),
          GetInt(fd, IPPROTO_TCP, TCP_KEEPINTVL), GetInt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT)};
}

int Port(const sockaddr_storage& a) {
  return ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(a).sin6_port
                                       : reinterpret_cast<const sockaddr_in&>(a).sin_port);
}

// The first TCP socket of this process whose local (or, with `peer`, remote) port is `port`.
std::optional<int> FindSocket(int port, bool peer) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  std::optional<int> found;
  while (dirent* e = readdir(dir)) {
    int fd = std::atoi(e->d_name);
    if (fd <= 2) continue;
    sockaddr_storage local{}, remote{};
    socklen_t llen = sizeof local, rlen = sizeof remote;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &rlen) != 0) continue;
    if (Port(peer ? remote : local) == port) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
}

TEST(TcpKeepaliveTest, SetsProbesInWholeSecondsAndTheDeadlineInMilliseconds) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SetTcpKeepalive(fd, TcpKeepalive{.probe_interval = absl::Milliseconds(1500),
                                               .timeout = absl::Milliseconds(4500)})
                  .ok());
  Keepalive k = Read(fd);
  EXPECT_EQ(k.on, 1);
  EXPECT_EQ(k.idle, 2);
  EXPECT_EQ(k.interval, 2);
  EXPECT_EQ(k.user_timeout_ms, 4500);
  EXPECT_TRUE(absl::IsInvalidArgument(SetTcpKeepalive(
      fd, TcpKeepalive{.probe_interval = absl::ZeroDuration(), .timeout = absl::Seconds(1)})));
  close(fd);
  EXPECT_TRUE(absl::IsInternal(SetTcpKeepalive(
      fd, TcpKeepalive{.probe_interval = absl::Seconds(1), .timeout = absl::Seconds(3)})));
}

// Both ends of a real rendezvous connection carry the options: the server's accepted
// socket (its interval x misses) and the agent channel's (interval + timeout). This is
// what checks the socket mutator layout declared in tcp_keepalive.cc against gRPC.
TEST(TcpKeepaliveTest, ServerAndAgentConnectionsCarryIt) {
  RendezvousServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.heartbeat_interval = absl::Seconds(2);
  options.heartbeat_misses = 3;
  absl::StatusOr<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  int port = (*server)->port();
  std::shared_ptr<grpc::Channel> channel =
      MakeChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(),
                  absl::Seconds(3), absl::Seconds(4));
  ASSERT_TRUE(
      channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
  std::optional<int> client = FindSocket(port, /*peer=*/true);
  ASSERT_TRUE(client.has_value());
  Keepalive c = Read(*client);
  EXPECT_EQ(c.on, 1);
  EXPECT_EQ(c.idle, 3);
  EXPECT_EQ(c.user_timeout_ms, 7000);
  // The listener has the port too; the accepted socket is the one with a peer.
  std::optional<int> accepted;
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!(accepted = FindSocket(port, /*peer=*/false)) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));  // the server's accept may trail the client
  }
  ASSERT_TRUE(accepted.has_value());
  Keepalive s = Read(*accepted);
  EXPECT_EQ(s.on, 1);
  EXPECT_EQ(s.idle, 2);
  EXPECT_EQ(s.interval, 2);
  EXPECT_EQ(s.user_timeout_ms, 6000);
}

}  // namespace
}  // namespace muster::rdzv::grpc_internal
