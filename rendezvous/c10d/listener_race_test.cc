// Listen() when another socket takes the port between our bind and our listen: two agents
// that bind one port at once (both SO_REUSEADDR, neither listening yet) both bind, and the
// second to listen gets EADDRINUSE. That must read as "port in use" (Unavailable, worth a
// retry), as at bind, not as a permanent error (note21: node 1 exited 2).
//
// The race is made deterministic without sleeps: this binary defines listen(), which
// interposes libc's for the code under test (an executable's symbols come first), and lets
// an armed rival socket listen just before ours does. Only this test binary has it.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "base/unique_fd.h"
#include "gtest/gtest.h"
#include "rendezvous/c10d/listener.h"

namespace {

// The socket that listens first at the next listen() call (-1: none armed).
int g_rival_fd = -1;

int RealListen(int fd, int backlog) {
  using ListenFn = int (*)(int, int);
  static const ListenFn real = reinterpret_cast<ListenFn>(dlsym(RTLD_NEXT, "listen"));
  if (real == nullptr) abort();  // no libc listen: nothing below could mean anything
  return real(fd, backlog);
}

}  // namespace

extern "C" int listen(int fd, int backlog) noexcept {
  if (int rival = std::exchange(g_rival_fd, -1); rival >= 0 && RealListen(rival, 1) != 0) {
    return -1;  // errno from the rival's listen: the test then fails on the error text
  }
  return RealListen(fd, backlog);
}

namespace muster::c10d {
namespace {

// A socket bound like Listen() binds (SO_REUSEADDR, 127.0.0.1, a free port), not
// listening; *port is its port.
UniqueFd BoundRival(uint16_t* port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(fd.valid()) << "socket: " << errno;
  int one = 1;
  EXPECT_EQ(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0) << errno;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << errno;
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0) << errno;
  *port = ntohs(addr.sin_port);
  return fd;
}

TEST(ListenerRaceTest, PortTakenBetweenBindAndListenIsUnavailable) {
  uint16_t port = 0;
  UniqueFd rival = BoundRival(&port);
  ASSERT_NE(port, 0);
  g_rival_fd = rival.get();
  absl::StatusOr<BoundListener> ours = Listen("127.0.0.1", port);
  EXPECT_EQ(g_rival_fd, -1) << "Listen() never reached listen()";
  ASSERT_FALSE(ours.ok()) << "listened on " << ours->address << " beside a listening rival";
  EXPECT_EQ(ours.status().code(), absl::StatusCode::kUnavailable) << ours.status();
  EXPECT_NE(ours.status().message().find("listen: address already in use"), std::string::npos)
      << ours.status();
}

TEST(ListenerRaceTest, WithoutARivalTheSamePortListens) {
  // The control: the bound, never listening rival alone does not keep Listen() off the
  // port (SO_REUSEADDR on both), so the failure above is the listen race, not the bind.
  uint16_t port = 0;
  UniqueFd rival = BoundRival(&port);
  ASSERT_NE(port, 0);
  absl::StatusOr<BoundListener> ours = Listen("127.0.0.1", port);
  ASSERT_TRUE(ours.ok()) << ours.status();
  EXPECT_EQ(ours->port, port);
}

}  // namespace
}  // namespace muster::c10d
