// StoreServer over real sockets with the legacy (torch 1.13-2.1) numbering.
#include "rendezvous/c10d/store_server.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rendezvous/c10d/test_client.h"

namespace muster::c10d {
namespace {

const std::string kStop(1, static_cast<char>(kStopWaiting));

class LegacyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreServer::Options options;
    options.bind_address = "127.0.0.1";
    auto server = StoreServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  TestClient Client() {
    auto c = TestClient::Connect(server_->port(), Protocol::kLegacy);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }
  // Polls num_connections() until it equals `n` or 10 s pass.
  bool ConnectionsReach(size_t n) {
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      if (server_->num_connections() == n) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }
  std::unique_ptr<StoreServer> server_;
};

TEST(StoreServerStartTest, DualStackDefaultAndEphemeralPorts) {
  auto a = StoreServer::Start({});
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = StoreServer::Start({});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE((*a)->port(), 0);
  EXPECT_NE((*a)->port(), (*b)->port());
  auto c = TestClient::Connect((*a)->port(), Protocol::kLegacy);  // IPv4 client
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->NumKeys().value(), 0);
  (*a)->Shutdown();
  (*a)->Shutdown();  // idempotent
  EXPECT_TRUE(c->ClosedWithin(absl::Seconds(5)));
}

TEST(StoreServerStartTest, ConnectionGaugeFollowsEveryRoundsStore) {
  // One gauge shared by two stores (two rounds), as the agent's metrics share theirs.
  auto gauge = std::make_shared<std::atomic<int64_t>>(0);
  auto reaches = [&](int64_t n) {
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (gauge->load() != n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    return gauge->load() == n;
  };
  auto first = StoreServer::Start({.bind_address = "127.0.0.1", .connection_gauge = gauge});
  ASSERT_TRUE(first.ok()) << first.status();
  auto a = TestClient::Connect((*first)->port(), Protocol::kLegacy);
  auto b = TestClient::Connect((*first)->port(), Protocol::kLegacy);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(reaches(2)) << gauge->load();
  auto second = StoreServer::Start({.bind_address = "127.0.0.1", .connection_gauge = gauge});
  ASSERT_TRUE(second.ok()) << second.status();
  {
    auto c = TestClient::Connect((*second)->port(), Protocol::kLegacy);
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(reaches(3)) << gauge->load();
    (*first)->Shutdown();  // its two connections end with it
    EXPECT_EQ(gauge->load(), 1);
  }  // a client hanging up
  EXPECT_TRUE(reaches(0)) << gauge->load();
}

TEST(StoreServerStartTest, RejectsNonNumericAddressAndTakenPort) {
  StoreServer::Options options;
  options.bind_address = "localhost";
  EXPECT_EQ(StoreServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  auto a = StoreServer::Start({});
  ASSERT_TRUE(a.ok());
  options.bind_address = "::";
  options.port = (*a)->port();
  EXPECT_FALSE(StoreServer::Start(options).ok());
}

TEST_F(LegacyStoreTest, AddInitBytesFromTheContractTrace) {
  TestClient c = Client();
  const char req[] = "\x03\x05\0\0\0\0\0\0\0init/\x01\0\0\0\0\0\0\0";
  ASSERT_TRUE(c.SendRaw(std::string_view(req, sizeof(req) - 1)).ok());
  EXPECT_EQ(c.Read(8).value(), std::string("\x01\0\0\0\0\0\0\0", 8));
}

TEST_F(LegacyStoreTest, EveryLegacyOperation) {
  TestClient c = Client();
  ASSERT_TRUE(c.Set("/a", "1").ok());
  EXPECT_EQ(c.Get("/a").value(), "1");
  EXPECT_EQ(c.Get("/missing").value(), "");  // union: empty, no close
  EXPECT_EQ(c.Add("/n", 5).value(), 5);
  EXPECT_EQ(c.Add("/n", -7).value(), -2);
  EXPECT_EQ(c.CompareSet("/cas", "", "x").value(), "x");
  EXPECT_EQ(c.CompareSet("/cas", "y", "z").value(), "x");
  EXPECT_EQ(c.CompareSet("/cas", "x", "z").value(), "z");
  EXPECT_EQ(c.Check({"/a", "/n"}).value(), kCheckReady);
  EXPECT_EQ(c.Check({"/a", "/nope"}).value(), kCheckNotReady);
  ASSERT_TRUE(c.SendWait({"/a", "/cas"}).ok());
  EXPECT_EQ(c.ReadU8().value(), kStopWaiting);
  EXPECT_EQ(c.NumKeys().value(), 3);
  EXPECT_EQ(c.DeleteKey("/a").value(), 1);
  EXPECT_EQ(c.DeleteKey("/a").value(), 0);
  ASSERT_TRUE(c.Append("/ap", "ab").ok());
  ASSERT_TRUE(c.Append("/ap", "cd").ok());
  ASSERT_TRUE(c.MultiSet({{"/m1", "v1"}, {"/m2", ""}}).ok());
  EXPECT_EQ(c.MultiGet({"/ap", "/m1", "/m2"}).value(),
            (std::vector<std::string>{"abcd", "v1", ""}));
  ASSERT_TRUE(c.Send(c.Request(Op::kWatchKey).Str("/w")).ok());
  EXPECT_EQ(c.ReadU8().value(), kWatchCallbackRegistered);
  ASSERT_TRUE(c.Send(c.Request(Op::kCancelWait)).ok());
  EXPECT_EQ(c.ReadU8().value(), kWaitCanceled);
  EXPECT_EQ(c.NumKeys().value(), 5);
}

TEST_F(LegacyStoreTest, WaitOnSeveralKeysWakesWhenAllAppear) {
  TestClient waiter = Client();
  TestClient setter = Client();
  ASSERT_TRUE(waiter.SendWait({"/x", "/y"}).ok());
  EXPECT_TRUE(waiter.SilentFor(absl::Milliseconds(100)));
  ASSERT_TRUE(setter.Set("/x", "1").ok());
  EXPECT_TRUE(waiter.SilentFor(absl::Milliseconds(100)));
  EXPECT_EQ(setter.Add("/y", 1).value(), 1);
  EXPECT_EQ(waiter.ReadU8().value(), kStopWaiting);
  EXPECT_EQ(waiter.Get("/x").value(), "1");  // the connection is still in sync
}

TEST_F(LegacyStoreTest, DeleteDoesNotWakeAndClosedWaiterIsForgotten) {
  TestClient waiter = Client();
  TestClient other = Client();
  ASSERT_TRUE(waiter.SendWait({"/k"}).ok());
  EXPECT_EQ(other.DeleteKey("/k").value(), 0);
  EXPECT_TRUE(waiter.SilentFor(absl::Milliseconds(100)));
  { TestClient gone = std::move(waiter); }  // closes with a registration pending
  ASSERT_TRUE(ConnectionsReach(1));
  ASSERT_TRUE(other.Set("/k", "v").ok());
  EXPECT_EQ(other.Get("/k").value(), "v");
}

TEST_F(LegacyStoreTest, RequestSentOneByteAtATime) {
  TestClient c = Client();
  std::string bytes = c.Request(Op::kSet).Str("/slow").Str(std::string(300, 'v')).bytes();
  bytes += c.Request(Op::kGet).Str("/slow").bytes();
  for (char b : bytes) ASSERT_TRUE(c.SendRaw(std::string_view(&b, 1)).ok());
  std::string expected;
  AppendString(&expected, std::string(300, 'v'));
  EXPECT_EQ(c.Read(expected.size()).value(), expected);
}

TEST_F(LegacyStoreTest, SeveralRequestsInOneSegment) {
  TestClient c = Client();
  std::string bytes = c.Request(Op::kSet).Str("/a").Str("1").bytes() +
                      c.Request(Op::kAdd).Str("/b").I64(2).bytes() +
                      c.Request(Op::kGetNumKeys).bytes() + c.Request(Op::kGet).Str("/a").bytes();
  ASSERT_TRUE(c.SendRaw(bytes).ok());
  EXPECT_EQ(c.ReadI64().value(), 2);
  EXPECT_EQ(c.ReadI64().value(), 2);
  EXPECT_EQ(c.ReadString().value(), "1");
}

TEST_F(LegacyStoreTest, LargeValueRoundTrip) {
  TestClient c = Client();
  std::string big(8 * 1024 * 1024, 'z');
  big[12345] = 'q';
  ASSERT_TRUE(c.Set("/big", big).ok());
  EXPECT_EQ(c.Get("/big").value(), big);
}

TEST_F(LegacyStoreTest, ManyConcurrentClients) {
  constexpr int kThreads = 8;
  constexpr int kClientsPerThread = 64;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this] {
      std::vector<TestClient> clients;
      for (int i = 0; i < kClientsPerThread; ++i) {
        auto c = TestClient::Connect(server_->port(), Protocol::kLegacy);
        ASSERT_TRUE(c.ok()) << c.status();
        clients.push_back(std::move(*c));
      }
      for (TestClient& c : clients) ASSERT_TRUE(c.Add("/counter", 1).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(ConnectionsReach(0));
  TestClient c = Client();
  EXPECT_EQ(c.Get("/counter").value(), std::to_string(kThreads * kClientsPerThread));
}

TEST_F(LegacyStoreTest, FreshServerHasFreshKeys) {
  TestClient c = Client();
  ASSERT_TRUE(c.Set("/stale", "1").ok());
  EXPECT_EQ(c.NumKeys().value(), 1);
  auto next = StoreServer::Start({});
  ASSERT_TRUE(next.ok());
  auto fresh = TestClient::Connect((*next)->port(), Protocol::kLegacy);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->NumKeys().value(), 0);
}

}  // namespace
}  // namespace muster::c10d
