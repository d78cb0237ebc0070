// SharedPort over real sockets: the first bytes decide, unconsumed; a silent connection
// delays no other and reaches the store at its deadline; the store side goes to the
// current round's store only (store_router.h).
#include "rendezvous/shared_port/shared_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "gtest/gtest.h"
#include "rendezvous/c10d/test_client.h"
#include "rendezvous/shared_port/first_bytes.h"
#include "rendezvous/shared_port/store_router.h"

namespace muster::shared_port {
namespace {

UniqueFd ConnectTo(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

void SendAll(int fd, std::string_view bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// What the handlers received, in order: ("h2"|"store", the bytes waiting on the socket).
class Received {
 public:
  SharedPort::Handler Handler(std::string kind) {
    return [this, kind](UniqueFd fd, std::string) {
      pollfd p{.fd = fd.get(), .events = POLLIN, .revents = 0};
      std::string bytes;
      if (::poll(&p, 1, 0) == 1) {
        char buf[64];
        ssize_t n = ::recv(fd.get(), buf, sizeof(buf), 0);
        if (n > 0) bytes.assign(buf, n);
      }
      MutexLock lock(&mu_);
      got_.push_back(kind + ":" + bytes);
      cv_.SignalAll();
    };
  }
  // The first `n` hand-overs, or fewer after `timeout`.
  std::vector<std::string> Wait(size_t n, absl::Duration timeout) {
    MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + timeout;
    while (got_.size() < n) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return got_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<std::string> got_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<SharedPort> StartPort(Received& r, absl::Duration decide_timeout) {
  auto port = SharedPort::Start({.bind_address = "127.0.0.1",
                                 .decide_timeout = decide_timeout,
                                 .on_http2 = r.Handler("h2"),
                                 .on_store = r.Handler("store")});
  EXPECT_TRUE(port.ok()) << port.status();
  return *std::move(port);
}

TEST(SharedPortTest, PrefaceGoesToHttp2AndAnOpcodeToTheStoreWithTheirBytesUnread) {
  Received r;
  auto port = StartPort(r, absl::Seconds(30));
  UniqueFd h2 = ConnectTo(port->port());
  SendAll(h2.get(), kHttp2Preface);
  EXPECT_EQ(r.Wait(1, absl::Seconds(10)),
            std::vector<std::string>{"h2:" + std::string(kHttp2Preface)});
  UniqueFd store = ConnectTo(port->port());
  SendAll(store.get(), std::string("\3", 1));
  EXPECT_EQ(r.Wait(2, absl::Seconds(10)).back(), std::string("store:\3", 7));
}

TEST(SharedPortTest, APrefaceInPiecesWaitsForTheWholeOfIt) {
  Received r;
  auto port = StartPort(r, absl::Seconds(30));
  UniqueFd h2 = ConnectTo(port->port());
  SendAll(h2.get(), kHttp2Preface.substr(0, 5));
  EXPECT_TRUE(r.Wait(1, absl::Milliseconds(300)).empty());
  SendAll(h2.get(), kHttp2Preface.substr(5));
  EXPECT_EQ(r.Wait(1, absl::Seconds(10)),
            std::vector<std::string>{"h2:" + std::string(kHttp2Preface)});
}

TEST(SharedPortTest, ASilentConnectionDelaysNoOtherAndGoesToTheStoreAtItsDeadline) {
  Received r;
  auto port = StartPort(r, absl::Seconds(1));
  absl::Time t0 = absl::Now();
  UniqueFd silent = ConnectTo(port->port());
  UniqueFd h2 = ConnectTo(port->port());
  SendAll(h2.get(), kHttp2Preface);
  std::vector<std::string> first = r.Wait(1, absl::Seconds(10));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].substr(0, 3), "h2:");
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(900));  // not behind the silent one
  std::vector<std::string> both = r.Wait(2, absl::Seconds(10));
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[1], "store:");
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(900));
}

TEST(SharedPortTest, AStalledPrefaceIsClosedAtItsDeadline) {
  Received r;
  auto port = StartPort(r, absl::Milliseconds(300));
  UniqueFd h2 = ConnectTo(port->port());
  SendAll(h2.get(), "PRI * H");
  pollfd p{.fd = h2.get(), .events = POLLIN, .revents = 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  char c;
  ssize_t n = ::recv(h2.get(), &c, 1, 0);
  // Closed, handed to nobody: EOF, or a reset since its bytes were never read.
  EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n << " " << errno;
  EXPECT_TRUE(r.Wait(1, absl::Milliseconds(100)).empty());
}

// The store side: each round's store is fresh, the old one's connections end with it, and
// connections between rounds are closed.
TEST(SharedPortTest, RoutedStoresAreFreshPerRound) {
  auto router = std::make_shared<StoreRouter>();
  auto port = SharedPort::Start(
      {.bind_address = "127.0.0.1", .on_store = [router](UniqueFd fd, std::string peer) {
         router->Route(std::move(fd), std::move(peer));
       }});
  ASSERT_TRUE(port.ok()) << port.status();
  uint16_t p = (*port)->port();
  auto round0 = StoreRouter::StartStore(router, p);
  ASSERT_TRUE(round0.ok()) << round0.status();
  EXPECT_EQ((*round0)->port(), p);
  auto old = c10d::TestClient::Connect(p, c10d::Protocol::kLegacy);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(old->Set("/round0", "x").ok());
  ASSERT_EQ(old->Get("/round0").value(), "x");  // a reply: round 0's store has it
  round0->reset();
  EXPECT_TRUE(old->ClosedWithin(absl::Seconds(10)));
  auto between = c10d::TestClient::Connect(p, c10d::Protocol::kModern);
  ASSERT_TRUE(between.ok());
  EXPECT_TRUE(between->ClosedWithin(absl::Seconds(10)));
  auto round1 = StoreRouter::StartStore(router, p);
  ASSERT_TRUE(round1.ok());
  auto fresh = c10d::TestClient::Connect(p, c10d::Protocol::kModern);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->NumKeys().value(), 0);
  ASSERT_TRUE(fresh->Set("/round1", "y").ok());
  EXPECT_EQ(fresh->Get("/round1").value(), "y");
}

}  // namespace
}  // namespace muster::shared_port
