// Hostile and sloppy peers: absurd lengths, random bytes, half requests, peers
// that never read, thousands of idle sockets. Each must cost at most its own
// connection.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rendezvous/c10d/store_server.h"
#include "rendezvous/c10d/test_client.h"

namespace muster::c10d {
namespace {

class RobustnessTest : public ::testing::Test {
 protected:
  void Start(const Limits& limits = Limits{}) {
    StoreServer::Options options;
    options.bind_address = "127.0.0.1";
    options.limits = limits;
    auto server = StoreServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto good = TestClient::Connect(server_->port(), Protocol::kLegacy);
    ASSERT_TRUE(good.ok());
    good_.emplace(std::move(*good));
    ASSERT_TRUE(good_->Set("/alive", "yes").ok());
  }
  TestClient Client(Protocol protocol = Protocol::kLegacy) {
    auto c = TestClient::Connect(server_->port(), protocol);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }
  // The well-behaved client still gets answers.
  void ExpectServing() {
    auto v = good_->Get("/alive");
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, "yes");
  }
  bool ConnectionsReach(size_t n) {
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      if (server_->num_connections() == n) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }
  std::unique_ptr<StoreServer> server_;
  std::optional<TestClient> good_;
};

TEST_F(RobustnessTest, HugeLengthsAndCountsCloseOnlyThatConnection) {
  Start();
  constexpr uint64_t kHuge = uint64_t{1} << 60;
  std::vector<std::pair<Protocol, std::string>> attacks = {
      {Protocol::kLegacy, RequestBytes(Protocol::kLegacy, Op::kGet).U64(kHuge).bytes()},
      {Protocol::kLegacy, RequestBytes(Protocol::kLegacy, Op::kSet).Str("/k").U64(kHuge).bytes()},
      {Protocol::kLegacy, RequestBytes(Protocol::kLegacy, Op::kWait).U64(kHuge).bytes()},
      {Protocol::kLegacy, RequestBytes(Protocol::kLegacy, Op::kMultiSet).U64(kHuge).bytes()},
      {Protocol::kLegacy,
       RequestBytes(Protocol::kLegacy, Op::kSet).Str("/k").U64(~uint64_t{0}).bytes()},
      {Protocol::kModern, RequestBytes(Protocol::kModern, Op::kCheck).U64(kHuge).bytes()},
      {Protocol::kModern,
       RequestBytes(Protocol::kModern, Op::kQueuePush).Str("/q").U64(kHuge).bytes()},
  };
  for (const auto& [protocol, bytes] : attacks) {
    TestClient bad = Client(protocol);
    ASSERT_TRUE(bad.SendRaw(bytes).ok());
    EXPECT_TRUE(bad.ClosedWithin(absl::Seconds(5))) << testing::PrintToString(bytes);
    ExpectServing();
  }
  EXPECT_TRUE(ConnectionsReach(1));
}

TEST_F(RobustnessTest, LimitsAreConfigurable) {
  Limits limits;
  limits.max_key_bytes = 16;
  limits.max_value_bytes = 32;
  Start(limits);
  TestClient c = Client();
  ASSERT_TRUE(c.Set("/sixteen-bytes-k", std::string(32, 'v')).ok());
  EXPECT_EQ(c.Get("/sixteen-bytes-k").value(), std::string(32, 'v'));
  ASSERT_TRUE(c.Set("/seventeen-bytes-", "v").ok());
  EXPECT_TRUE(c.ClosedWithin(absl::Seconds(5)));
  ExpectServing();
}

TEST_F(RobustnessTest, RandomBytesNeverTakeTheServerDown) {
  Start();
  std::mt19937_64 rng(20261121);
  for (int i = 0; i < 300; ++i) {
    TestClient bad = Client();
    std::string junk(1 + rng() % 2048, '\0');
    for (char& b : junk) b = static_cast<char>(rng());
    if (i % 3 == 0) junk = std::string("\x00\xCE\xF7\x85\x3C", 5) + junk;  // modern junk
    if (i % 5 == 0) junk[0] = static_cast<char>(rng() % 20);               // plausible opcode
    ASSERT_TRUE(bad.SendRaw(junk).ok() || true);
    if (i % 50 == 0) ExpectServing();
  }
  ExpectServing();
  EXPECT_TRUE(ConnectionsReach(1));
}

TEST_F(RobustnessTest, HalfRequestDoesNotBlockOthersAndCompletesLater) {
  Start();
  TestClient slow = Client();
  std::string bytes = slow.Request(Op::kAdd).Str("/ctr").I64(7).bytes();
  ASSERT_TRUE(slow.SendRaw(bytes.substr(0, 10)).ok());
  ExpectServing();
  EXPECT_EQ(good_->Add("/ctr", 1).value(), 1);
  ASSERT_TRUE(slow.SendRaw(bytes.substr(10)).ok());
  EXPECT_EQ(slow.ReadI64().value(), 8);
  // Half a request then a disconnect costs nothing either.
  {
    TestClient gone = Client();
    ASSERT_TRUE(gone.SendRaw(bytes.substr(0, 13)).ok());
  }
  EXPECT_TRUE(ConnectionsReach(2));
  ExpectServing();
}

TEST_F(RobustnessTest, NonNumericAddClosesOnlyThatConnection) {
  Start();
  TestClient c = Client();
  ASSERT_TRUE(c.Set("/text", "abc").ok());
  ASSERT_TRUE(c.Send(c.Request(Op::kAdd).Str("/text").I64(1)).ok());
  EXPECT_TRUE(c.ClosedWithin(absl::Seconds(5)));
  ExpectServing();
  EXPECT_EQ(good_->Get("/text").value(), "abc");
}

TEST_F(RobustnessTest, PeerThatReadsLateGetsEveryReplyInOrder) {
  Limits limits;
  limits.output_soft_limit_bytes = 64 * 1024;
  Start(limits);
  TestClient lazy = Client();
  std::string value(256 * 1024, 'x');
  ASSERT_TRUE(good_->Set("/v", value).ok());
  ASSERT_TRUE(good_->Get("/v").ok());  // applied before `lazy` asks
  constexpr int kRequests = 200;       // 50 MiB of replies, far above socket buffers
  std::string burst;
  for (int i = 0; i < kRequests; ++i) {
    burst += lazy.Request(Op::kGet).Str("/v").bytes();
    burst += lazy.Request(Op::kAdd).Str("/seq").I64(1).bytes();
  }
  ASSERT_TRUE(lazy.SendRaw(burst).ok());
  ExpectServing();  // the loop is not stuck writing to `lazy`
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(lazy.ReadString().value() == value) << i;  // no 256 KiB dumps
    ASSERT_EQ(lazy.ReadI64().value(), i + 1);
  }
}

TEST_F(RobustnessTest, WatcherThatNeverReadsIsCutAtTheHardLimit) {
  Limits limits;
  limits.output_hard_limit_bytes = 1024 * 1024;
  Start(limits);
  TestClient watcher = Client();
  ASSERT_TRUE(watcher.Send(watcher.Request(Op::kWatchKey).Str("/w")).ok());
  ASSERT_EQ(watcher.ReadU8().value(), kWatchCallbackRegistered);
  std::string value(256 * 1024, 'w');
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(good_->Set("/w", value).ok());
  ExpectServing();
  EXPECT_TRUE(ConnectionsReach(1));
}

TEST_F(RobustnessTest, ThousandsOfIdleConnections) {
  Start();
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  // Both ends live in this process: two descriptors per connection.
  size_t n = std::min<size_t>(5000, (lim.rlim_cur - 100) / 2);
  std::vector<TestClient> idle;
  idle.reserve(n);
  for (size_t i = 0; i < n; ++i) idle.push_back(Client());
  EXPECT_TRUE(ConnectionsReach(n + 1));
  absl::Time start = absl::Now();
  ExpectServing();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_EQ(idle[n / 2].Add("/from-idle", 1).value(), 1);
  idle.clear();
  EXPECT_TRUE(ConnectionsReach(1));
}

// Resident memory of this process in KiB (the server runs in a thread of it).
long ResidentKiB() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long pages = 0, resident = 0;
  int got = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return got == 2 ? resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

// A connection that has been served keeps no read chunk: 1024 clients that each
// did one request must not cost the server 64 KiB apiece (they did once: 65 MB
// at 1024 connections).
TEST_F(RobustnessTest, ServedConnectionsHoldNoReadChunk) {
  Start();
  constexpr int kClients = 1024;
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_cur < 2 * kClients + 64) GTEST_SKIP() << "SKIPPED LOUDLY: RLIMIT_NOFILE too low";
  // Warm up the allocator and the loop's own buffers first.
  std::vector<TestClient> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(Client());
  for (auto& c : clients) ASSERT_TRUE(c.Add("/n", 1).ok());
  long before = ResidentKiB();
  ASSERT_GT(before, 0);
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(Client());
    ASSERT_TRUE(clients.back().Add("/n", 1).ok());
  }
  long grown = ResidentKiB() - before;
  // Client objects, kernel-side socket state and the server's per-connection
  // bookkeeping are well under 4 KiB per connection; a 64 KiB chunk each is not.
  EXPECT_LT(grown, 8 * kClients) << "KiB grown for " << kClients << " served connections";
  ExpectServing();
}

// Peak resident memory of this process in KiB since the last ResetPeakKiB().
long PeakKiB() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long peak = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "VmHWM: %ld kB", &peak) == 1) break;
  }
  std::fclose(f);
  return peak;
}

bool ResetPeakKiB() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");  // "5": reset VmHWM (Linux 4.0+)
  if (f == nullptr) return false;
  bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// Issue 18 finding 4: an 18 KB MULTI_GET naming an 8 MiB key 2000 times asked
// for 16 GB, and the store built that reply whole before checking the output
// limit (std::bad_alloc under a Pod's memory limit killed the agent). Here 64
// times a 4 MiB key against a 16 MiB limit: refused from its size, so the peak
// memory of the process does not move by anything like the 256 MiB asked for.
TEST_F(RobustnessTest, MultiGetPastTheOutputLimitIsRefusedBeforeItIsBuilt) {
  Limits limits;
  limits.output_hard_limit_bytes = 16 * 1024 * 1024;
  Start(limits);
  ASSERT_TRUE(good_->Set("/big", std::string(4 * 1024 * 1024, 'b')).ok());
  ASSERT_EQ(good_->Get("/big").value().size(), 4u * 1024 * 1024);  // one copy is fine
  if (!ResetPeakKiB()) GTEST_SKIP() << "SKIPPED LOUDLY: cannot reset VmHWM";
  long before = PeakKiB();
  ASSERT_GT(before, 0);
  TestClient greedy = Client();
  ASSERT_TRUE(
      greedy.Send(greedy.Request(Op::kMultiGet).Keys(std::vector<std::string>(64, "/big"))).ok());
  EXPECT_TRUE(greedy.ClosedWithin(absl::Seconds(10)));
  long grown = PeakKiB() - before;
  EXPECT_LT(grown, 64 * 1024) << "KiB of peak memory for a refused 256 MiB reply";
  // A GET past the limit is refused the same way; others are served meanwhile.
  ASSERT_TRUE(good_->Set("/bigger", std::string(17 * 1024 * 1024, 'c')).ok());
  ASSERT_EQ(good_->NumKeys().value(), 3);  // the SET has been applied
  TestClient reader = Client();
  ASSERT_TRUE(reader.Send(reader.Request(Op::kGet).Str("/bigger")).ok());
  EXPECT_TRUE(reader.ClosedWithin(absl::Seconds(10)));
  ExpectServing();
  EXPECT_EQ(good_->MultiGet({"/big", "/alive"}).value()[1], "yes");
  EXPECT_TRUE(ConnectionsReach(1));
}

// APPEND used to copy the whole value each time (to tell watchers the old one):
// 300 appends of 1 KiB onto 32 MiB took about 4 s and stalled every other
// client meanwhile. In place they take milliseconds; 1 s leaves room for a
// loaded 2-core machine and the sanitizers.
TEST_F(RobustnessTest, AppendingToALargeValueDoesNotCopyIt) {
  Start();
  constexpr size_t kBig = 32 * 1024 * 1024;
  constexpr int kAppends = 300;
  ASSERT_TRUE(good_->Set("/log", std::string(kBig, 'a')).ok());
  ASSERT_EQ(good_->NumKeys().value(), 2);  // the SET has been applied
  TestClient appender = Client();
  std::string burst;
  for (int i = 0; i < kAppends; ++i) {
    burst += appender.Request(Op::kAppend).Str("/log").Str(std::string(1024, 'x')).bytes();
  }
  absl::Time start = absl::Now();
  ASSERT_TRUE(appender.SendRaw(burst).ok());
  ASSERT_EQ(appender.NumKeys().value(), 2);  // every APPEND before it was applied
  absl::Duration took = absl::Now() - start;
  std::printf("%d appends of 1 KiB onto 32 MiB: %.1f ms\n", kAppends,
              absl::ToDoubleMilliseconds(took));
  EXPECT_LT(took, absl::Seconds(1));
  std::string value = good_->Get("/log").value();
  ASSERT_EQ(value.size(), kBig + kAppends * 1024);
  EXPECT_EQ(value.substr(kBig - 1, 2), "ax");
  EXPECT_EQ(value.back(), 'x');
}

}  // namespace
}  // namespace muster::c10d
