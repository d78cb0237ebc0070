// Liveness over real loopback sockets: which ends count as a death (EOF without a bye
// after a hello), which do not (a bye, a reset, no or a malformed hello).
#include "rendezvous/etcd/liveness.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"
#include "gtest/gtest.h"

namespace muster::rdzv::etcd {
namespace {

using std::chrono::milliseconds;

// What on_ended was called with, in order.
class Ends {
 public:
  Liveness::EndedFn fn() {
    return [this](const std::string& id, int64_t lease) {
      MutexLock lock(&mu_);
      ends_.emplace_back(id, lease);
      cv_.SignalAll();
    };
  }
  // Waits up to `wait` for `n` ends; returns those seen.
  std::vector<std::pair<std::string, int64_t>> Await(size_t n, milliseconds wait) {
    MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::FromChrono(wait);
    while (ends_.size() < n) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return ends_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<std::pair<std::string, int64_t>> ends_ ABSL_GUARDED_BY(mu_);
};

// A plain TCP connection to "127.0.0.1:PORT".
int Dial(const std::string& address) {
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  return fd;
}

void Send(int fd, absl::string_view bytes) {
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

std::unique_ptr<Liveness> Start(const std::string& id, int64_t lease, Ends* ends) {
  absl::StatusOr<std::unique_ptr<Liveness>> l = Liveness::Start("127.0.0.1", id, lease, ends->fn());
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *std::move(l) : nullptr;
}

TEST(LivenessTest, EofAfterAHelloIsADeathOfThatNodeAndLease) {
  Ends ends;
  std::unique_ptr<Liveness> coordinator = Start("a", 0x1, &ends);
  ASSERT_NE(coordinator, nullptr);
  EXPECT_EQ(coordinator->address().rfind("127.0.0.1:", 0), 0u) << coordinator->address();
  int fd = Dial(coordinator->address());
  ASSERT_GE(fd, 0);
  Send(fd, "muster-liveness host:42:ab 7f3a\n");
  close(fd);  // a process's kernel closes its sockets when it dies
  auto seen = ends.Await(1, milliseconds(5000));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], std::make_pair(std::string("host:42:ab"), int64_t{0x7f3a}));
}

TEST(LivenessTest, AByeResetOrBadHelloIsNotADeath) {
  Ends ends;
  std::unique_ptr<Liveness> coordinator = Start("a", 0x1, &ends);
  ASSERT_NE(coordinator, nullptr);
  auto dial = [&] {
    int fd = Dial(coordinator->address());
    EXPECT_GE(fd, 0);
    return fd;
  };
  int bye = dial();
  Send(bye, "muster-liveness b 2\nB");  // closes on purpose
  close(bye);
  int reset = dial();
  Send(reset, "muster-liveness c 3\n");
  linger hard{.l_onoff = 1, .l_linger = 0};
  ASSERT_EQ(setsockopt(reset, SOL_SOCKET, SO_LINGER, &hard, sizeof hard), 0);
  close(reset);  // RST: not counted (a close with unread data resets too)
  for (absl::string_view bad : {"GET / HTTP/1.1\r\n\r\n", "muster-liveness d zz\n",
                                "muster-liveness d 0\n", "muster-liveness  5\n"}) {
    int fd = dial();
    Send(fd, bad);
    close(fd);
  }
  int silent = dial();  // no hello at all
  close(silent);
  // A real death after all of them: the only end reported.
  int dies = dial();
  Send(dies, "muster-liveness e 5\n");
  close(dies);
  auto seen = ends.Await(2, milliseconds(1000));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, "e");
}

// A plain listener on loopback standing in for a coordinator; its "ADDR:PORT" in `at`.
int Listen(std::string* at) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      listen(listener, 4) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return -1;
  }
  *at = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  return listener;
}

// Reads what `fd` sends until EOF, for at most `wait`; "" on a timeout or an error.
std::string ReadToEof(int fd, milliseconds wait) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) != 1) return "";
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) return "";
    if (n == 0) return got;
    got.append(buf, n);
  }
}

TEST(LivenessTest, FollowerSaysByeWhenItLeaves) {
  // The coordinator's side of a bye is AByeResetOrBadHelloIsNotADeath; this is the
  // follower's: its hello, then a bye before the close. A plain listener stands in for the
  // coordinator so that the test waits on what the follower sends, not on a sleep.
  std::string at;
  int listener = Listen(&at);
  ASSERT_GE(listener, 0);
  Ends ends;
  auto follower = Start("node", 0x20, &ends);
  ASSERT_NE(follower, nullptr);
  follower->Follow("coord", 0x10, at);
  int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  follower.reset();  // leaving on purpose
  EXPECT_EQ(ReadToEof(conn, milliseconds(5000)), "muster-liveness node 20\nB");
  close(conn);
  close(listener);
  EXPECT_TRUE(ends.Await(1, milliseconds(0)).empty());
}

TEST(LivenessTest, FollowerSeesTheCoordinatorDieButNotLeave) {
  // A coordinator that dies: a plain listener standing in, closed without a bye.
  std::string at;
  int listener = Listen(&at);
  ASSERT_GE(listener, 0);
  Ends ends;
  auto node = Start("node", 0x20, &ends);
  ASSERT_NE(node, nullptr);
  node->Follow("old", 0x30, at);
  int leaving = accept(listener, nullptr, nullptr);
  ASSERT_GE(leaving, 0);
  char hello[64] = {};
  ASSERT_GT(read(leaving, hello, sizeof hello - 1), 0);
  EXPECT_EQ(std::string(hello), "muster-liveness node 20\n");
  Send(leaving, "B");  // the old coordinator leaves
  close(leaving);
  node->Follow("next", 0x40, at);  // and the next one dies
  int dying = accept(listener, nullptr, nullptr);
  ASSERT_GE(dying, 0);
  ASSERT_GT(read(dying, hello, sizeof hello - 1), 0);
  close(dying);
  auto seen = ends.Await(2, milliseconds(1000));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], std::make_pair(std::string("next"), int64_t{0x40}));
  close(listener);
}

TEST(LivenessTest, AnUnreachableCoordinatorIsNotADeath) {
  Ends ends;
  auto node = Start("node", 0x20, &ends);
  ASSERT_NE(node, nullptr);
  node->Follow("gone", 0x30, "127.0.0.1:1");  // refused: the lease decides
  EXPECT_TRUE(ends.Await(1, milliseconds(500)).empty());
}

}  // namespace
}  // namespace muster::rdzv::etcd
