// The modern (torch 2.4+) protocol byte by byte, written from
// reference/torch_contract.md §1.2(d) and §1.3: no torch 2.x is installed here,
// so these bytes are the client.
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rendezvous/c10d/store_server.h"
#include "rendezvous/c10d/test_client.h"

namespace muster::c10d {
namespace {

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

class ModernStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = StoreServer::Start({});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  TestClient Client() {
    auto c = TestClient::Connect(server_->port(), Protocol::kModern);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }
  std::unique_ptr<StoreServer> server_;
};

TEST_F(ModernStoreTest, ValidatePingAndAddInitExactBytes) {
  TestClient c = Client();  // already sent 00 CE F7 85 3C, which gets no reply
  EXPECT_TRUE(c.SilentFor(absl::Milliseconds(50)));
  ASSERT_TRUE(c.SendRaw(Bytes({0x0D, 0x39, 0x30, 0x00, 0x00})).ok());  // PING(12345)
  EXPECT_EQ(c.Read(4).value(), Bytes({0x39, 0x30, 0x00, 0x00}));
  ASSERT_TRUE(c.SendRaw(Bytes({0x04, 5,   0,   0, 0, 0, 0, 0, 0, 'i', 'n',
                               'i',  't', '/', 1, 0, 0, 0, 0, 0, 0,   0}))
                  .ok());
  EXPECT_EQ(c.Read(8).value(), Bytes({1, 0, 0, 0, 0, 0, 0, 0}));
}

TEST_F(ModernStoreTest, EveryKeyValueOperation) {
  TestClient c = Client();
  ASSERT_TRUE(c.Set("/a", "1").ok());   // 0x01
  EXPECT_EQ(c.Get("/a").value(), "1");  // 0x03
  EXPECT_EQ(c.Get("/none").value(), "");
  EXPECT_EQ(c.Add("/n", 41).value(), 41);  // 0x04
  EXPECT_EQ(c.Add("/n", 1).value(), 42);
  EXPECT_EQ(c.CompareSet("/c", "", "v").value(), "v");  // 0x02
  EXPECT_EQ(c.CompareSet("/c", "w", "u").value(), "v");
  EXPECT_EQ(c.Check({"/a", "/c"}).value(), kCheckReady);  // 0x05
  EXPECT_EQ(c.Check({"/zz"}).value(), kCheckNotReady);
  ASSERT_TRUE(c.SendWait({"/a"}).ok());  // 0x06
  EXPECT_EQ(c.ReadU8().value(), kStopWaiting);
  EXPECT_EQ(c.NumKeys().value(), 3);        // 0x07
  EXPECT_EQ(c.DeleteKey("/c").value(), 1);  // 0x08
  ASSERT_TRUE(c.Append("/ap", "x").ok());   // 0x09
  ASSERT_TRUE(c.Append("/ap", "y").ok());
  ASSERT_TRUE(c.MultiSet({{"/m", "1"}, {"/o", "2"}}).ok());  // 0x0B
  EXPECT_EQ(c.MultiGet({"/ap", "/m", "/o"}).value(),         // 0x0A
            (std::vector<std::string>{"xy", "1", "2"}));
  ASSERT_TRUE(c.Send(c.Request(Op::kListKeys)).ok());  // 0x11
  EXPECT_EQ(c.ReadI64().value(), 5);
  std::vector<std::string> keys;
  for (int i = 0; i < 5; ++i) keys.push_back(c.ReadString().value());
  EXPECT_EQ(keys, (std::vector<std::string>{"/a", "/ap", "/m", "/n", "/o"}));
}

TEST_F(ModernStoreTest, QueuePushPopLenAndBlockingPop) {
  TestClient c = Client();
  TestClient popper = Client();
  // Blocking pop = WAIT([K]) first; a non-empty queue satisfies it.
  ASSERT_TRUE(popper.SendWait({"/q"}).ok());
  EXPECT_TRUE(popper.SilentFor(absl::Milliseconds(50)));
  ASSERT_TRUE(c.Send(c.Request(Op::kQueuePush).Str("/q").Str("first")).ok());  // 0x0E
  ASSERT_TRUE(c.Send(c.Request(Op::kQueuePush).Str("/q").Str("second")).ok());
  EXPECT_EQ(popper.ReadU8().value(), kStopWaiting);
  ASSERT_TRUE(c.Send(c.Request(Op::kQueueLen).Str("/q")).ok());  // 0x10
  EXPECT_EQ(c.ReadI64().value(), 2);
  ASSERT_TRUE(popper.Send(popper.Request(Op::kQueuePop).Str("/q")).ok());  // 0x0F
  EXPECT_EQ(popper.ReadI64().value(), 2);
  EXPECT_EQ(popper.ReadString().value(), "first");
  ASSERT_TRUE(popper.Send(popper.Request(Op::kQueuePop).Str("/q")).ok());
  EXPECT_EQ(popper.ReadI64().value(), 1);
  EXPECT_EQ(popper.ReadString().value(), "second");
  ASSERT_TRUE(popper.Send(popper.Request(Op::kQueuePop).Str("/q")).ok());
  EXPECT_EQ(popper.ReadI64().value(), 0);  // empty: no value follows
  EXPECT_EQ(c.NumKeys().value(), 0);       // queues are not keys
}

TEST_F(ModernStoreTest, BarrierReleasesAllAtWorldSize) {
  std::vector<TestClient> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(Client());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(clients[i].Send(clients[i].Request(Op::kBarrier).Str("/b").I64(3)).ok());
  }
  EXPECT_TRUE(clients[0].SilentFor(absl::Milliseconds(50)));
  ASSERT_TRUE(clients[2].Send(clients[2].Request(Op::kBarrier).Str("/b").I64(3)).ok());
  for (TestClient& c : clients) EXPECT_EQ(c.ReadU8().value(), kStopWaiting);
  EXPECT_EQ(clients[0].Get("/b").value(), "3");
}

TEST_F(ModernStoreTest, CancelWaitRepliesCanceledAndKeepsOrder) {
  TestClient waiter = Client();
  TestClient setter = Client();
  ASSERT_TRUE(waiter.SendWait({"/k"}).ok());
  ASSERT_TRUE(waiter.Send(waiter.Request(Op::kCancelWait)).ok());  // 0x0C
  EXPECT_EQ(waiter.ReadU8().value(), kWaitCanceled);
  ASSERT_TRUE(setter.Set("/k", "v").ok());
  EXPECT_TRUE(waiter.SilentFor(absl::Milliseconds(100)));  // registration is gone
  // STOP_WAITING already queued stays ahead of WAIT_CANCELED (client drains
  // both).
  ASSERT_TRUE(waiter.SendWait({"/j"}).ok());
  ASSERT_TRUE(setter.Set("/j", "v").ok());
  ASSERT_TRUE(setter.Get("/j").ok());  // the set has been applied
  ASSERT_TRUE(waiter.Send(waiter.Request(Op::kCancelWait)).ok());
  EXPECT_EQ(waiter.ReadU8().value(), kStopWaiting);
  EXPECT_EQ(waiter.ReadU8().value(), kWaitCanceled);
}

TEST_F(ModernStoreTest, SecondValidateClosesTheConnection) {
  TestClient c = Client();
  ASSERT_TRUE(c.SendRaw(Bytes({0x00, 0xCE, 0xF7, 0x85, 0x3C})).ok());
  EXPECT_TRUE(c.ClosedWithin(absl::Seconds(5)));
}

TEST_F(ModernStoreTest, BadMagicClosesTheConnection) {
  auto c = TestClient::Connect(server_->port(), Protocol::kLegacy);
  ASSERT_TRUE(c.ok());
  // Reads as a legacy SET whose key length is far beyond the limit.
  ASSERT_TRUE(c->SendRaw(Bytes({0x00, 0xDE, 0xAD, 0xBE, 0xEF, 0x0D, 1, 2, 3})).ok());
  EXPECT_TRUE(c->ClosedWithin(absl::Seconds(5)));
}

TEST_F(ModernStoreTest, LegacyOpcodesOutsideTheModernTableClose) {
  TestClient c = Client();
  ASSERT_TRUE(c.SendRaw(Bytes({0x13})).ok());
  EXPECT_TRUE(c.ClosedWithin(absl::Seconds(5)));
}

TEST_F(ModernStoreTest, LegacyAndModernClientsShareKeys) {
  TestClient modern = Client();
  auto legacy = TestClient::Connect(server_->port(), Protocol::kLegacy);
  ASSERT_TRUE(legacy.ok());
  ASSERT_TRUE(legacy->SendWait({"/shared"}).ok());
  ASSERT_TRUE(modern.Set("/shared", "both").ok());
  EXPECT_EQ(legacy->ReadU8().value(), kStopWaiting);
  EXPECT_EQ(legacy->Get("/shared").value(), "both");
  EXPECT_EQ(legacy->Add("/ctr", 2).value(), 2);
  EXPECT_EQ(modern.Add("/ctr", 3).value(), 5);
}

}  // namespace
}  // namespace muster::c10d
