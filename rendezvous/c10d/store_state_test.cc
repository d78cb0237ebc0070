#include "rendezvous/c10d/store_state.h"

#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rendezvous/c10d/wire.h"

namespace muster::c10d {
namespace {

class RecordingOutbox : public Outbox {
 public:
  void Send(ConnectionId conn, std::span<const std::string_view> parts) override {
    for (std::string_view part : parts) sent[conn].append(part.data(), part.size());
    last_parts = std::vector<std::string_view>(parts.begin(), parts.end());
  }
  std::string Take(ConnectionId conn) { return std::exchange(sent[conn], ""); }
  std::map<ConnectionId, std::string> sent;
  std::vector<std::string_view> last_parts;  // dangle once the state changes
};

Request Make(Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {},
             int64_t number = 0) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  r.number = number;
  return r;
}

std::string Str(std::string_view s) {
  std::string out;
  AppendString(&out, s);
  return out;
}

std::string I64(int64_t v) {
  std::string out;
  AppendI64(&out, v);
  return out;
}

const std::string kStop(1, static_cast<char>(kStopWaiting));

class StoreStateTest : public ::testing::Test {
 protected:
  absl::Status Run(ConnectionId conn, Request r) { return state_.Execute(conn, r); }
  RecordingOutbox out_;
  StoreState state_{&out_};
};

TEST_F(StoreStateTest, WaitWithSeveralKeysCompletesWhenTheLastArrives) {
  ASSERT_TRUE(Run(1, Make(Op::kSet, {"a"}, {"1"})).ok());
  ASSERT_TRUE(Run(2, Make(Op::kWait, {"a", "b", "c"})).ok());
  EXPECT_EQ(out_.Take(2), "");
  ASSERT_TRUE(Run(1, Make(Op::kSet, {"b"}, {"1"})).ok());
  EXPECT_EQ(out_.Take(2), "");
  ASSERT_TRUE(Run(1, Make(Op::kAdd, {"c"}, {}, 1)).ok());
  EXPECT_EQ(out_.Take(2), kStop);
  EXPECT_EQ(state_.num_waiting_connections(),
            1u);  // torch keeps keysAwaited_ at 0
}

TEST_F(StoreStateTest, DeleteDoesNotWakeAndDropForgetsWaits) {
  ASSERT_TRUE(Run(2, Make(Op::kWait, {"k"})).ok());
  ASSERT_TRUE(Run(1, Make(Op::kDeleteKey, {"k"})).ok());
  EXPECT_EQ(out_.Take(1), I64(0));
  state_.DropConnection(2);
  ASSERT_TRUE(Run(1, Make(Op::kSet, {"k"}, {"v"})).ok());
  EXPECT_EQ(out_.Take(2), "");
  EXPECT_EQ(state_.num_waiting_connections(), 0u);
}

TEST_F(StoreStateTest, CompareSetFollowsTorchIncludingTheLie) {
  ASSERT_TRUE(Run(1, Make(Op::kCompareSet, {"k"}, {"x", "y"})).ok());
  EXPECT_EQ(out_.Take(1),
            Str("x"));  // absent + non-empty expected: reply expected
  EXPECT_EQ(state_.num_keys(), 0u);
  ASSERT_TRUE(Run(2, Make(Op::kWait, {"k"})).ok());
  ASSERT_TRUE(Run(1, Make(Op::kCompareSet, {"k"}, {"", "y"})).ok());
  EXPECT_EQ(out_.Take(1), Str("y"));
  EXPECT_EQ(out_.Take(2), kStop);  // union semantics: COMPARE_SET wakes (libuv)
  ASSERT_TRUE(Run(1, Make(Op::kCompareSet, {"k"}, {"nope", "z"})).ok());
  EXPECT_EQ(out_.Take(1), Str("y"));
  ASSERT_TRUE(Run(1, Make(Op::kCompareSet, {"k"}, {"y", "z"})).ok());
  EXPECT_EQ(out_.Take(1), Str("z"));
}

TEST_F(StoreStateTest, AddUsesStollSemanticsAndRejectsText) {
  ASSERT_TRUE(Run(1, Make(Op::kSet, {"k"}, {" 12abc"})).ok());
  ASSERT_TRUE(Run(1, Make(Op::kAdd, {"k"}, {}, 3)).ok());
  EXPECT_EQ(out_.Take(1), I64(15));
  ASSERT_TRUE(Run(1, Make(Op::kGet, {"k"})).ok());
  EXPECT_EQ(out_.Take(1), Str("15"));
  ASSERT_TRUE(Run(1, Make(Op::kSet, {"t"}, {"abc"})).ok());
  EXPECT_FALSE(Run(1, Make(Op::kAdd, {"t"}, {}, 1)).ok());
  EXPECT_FALSE(ParseCounter("99999999999999999999").ok());
  EXPECT_EQ(ParseCounter("-7").value(), -7);
}

TEST_F(StoreStateTest, QueuesSatisfyWaitAndWakeOneWaiter) {
  ASSERT_TRUE(Run(2, Make(Op::kWait, {"q"})).ok());
  ASSERT_TRUE(Run(3, Make(Op::kWait, {"q"})).ok());
  ASSERT_TRUE(Run(1, Make(Op::kQueuePush, {"q"}, {"a"})).ok());
  EXPECT_EQ(out_.Take(2), kStop);
  EXPECT_EQ(out_.Take(3), "");
  ASSERT_TRUE(Run(1, Make(Op::kCheck, {"q"})).ok());
  EXPECT_EQ(out_.Take(1), std::string(1, static_cast<char>(kCheckReady)));
  ASSERT_TRUE(Run(1, Make(Op::kQueuePop, {"q"})).ok());
  EXPECT_EQ(out_.Take(1), I64(1) + Str("a"));
  ASSERT_TRUE(Run(1, Make(Op::kQueuePop, {"q"})).ok());
  EXPECT_EQ(out_.Take(1), I64(0));
  ASSERT_TRUE(Run(1, Make(Op::kGetNumKeys)).ok());
  EXPECT_EQ(out_.Take(1), I64(0));  // queues are not keys
}

TEST_F(StoreStateTest, BarrierReleasesEveryoneAtWorldSize) {
  ASSERT_TRUE(Run(1, Make(Op::kBarrier, {"b"}, {}, 3)).ok());
  ASSERT_TRUE(Run(2, Make(Op::kBarrier, {"b"}, {}, 3)).ok());
  EXPECT_EQ(out_.Take(1) + out_.Take(2), "");
  ASSERT_TRUE(Run(3, Make(Op::kBarrier, {"b"}, {}, 3)).ok());
  EXPECT_EQ(out_.Take(1), kStop);
  EXPECT_EQ(out_.Take(2), kStop);
  EXPECT_EQ(out_.Take(3), kStop);
  ASSERT_TRUE(Run(1, Make(Op::kGet, {"b"})).ok());
  EXPECT_EQ(out_.Take(1), Str("3"));
}

TEST_F(StoreStateTest, CancelWaitClearsRegistrations) {
  ASSERT_TRUE(Run(2, Make(Op::kWait, {"k"})).ok());
  ASSERT_TRUE(Run(2, Make(Op::kCancelWait)).ok());
  EXPECT_EQ(out_.Take(2), std::string(1, static_cast<char>(kWaitCanceled)));
  ASSERT_TRUE(Run(1, Make(Op::kSet, {"k"}, {"v"})).ok());
  EXPECT_EQ(out_.Take(2), "");
}

TEST_F(StoreStateTest, WatchKeyPushesUpdates) {
  ASSERT_TRUE(Run(2, Make(Op::kWatchKey, {"k"})).ok());
  EXPECT_EQ(out_.Take(2), std::string(1, static_cast<char>(kWatchCallbackRegistered)));
  ASSERT_TRUE(Run(1, Make(Op::kSet, {"k"}, {"v"})).ok());
  EXPECT_EQ(out_.Take(2),
            std::string(1, static_cast<char>(kWatchKeyCreated)) + Str("k") + Str("") + Str("v"));
  ASSERT_TRUE(Run(1, Make(Op::kDeleteKey, {"k"})).ok());
  EXPECT_EQ(out_.Take(2),
            std::string(1, static_cast<char>(kWatchKeyDeleted)) + Str("k") + Str("v") + Str(""));
}

TEST_F(StoreStateTest, ListKeysIsSortedAndMultiOpsWork) {
  std::vector<std::string> keys = {"/b", "/a", "init/"};
  Request r = Make(Op::kMultiSet, keys, {"2", "1", "0"});
  ASSERT_TRUE(state_.Execute(1, r).ok());
  ASSERT_TRUE(Run(1, Make(Op::kListKeys)).ok());
  EXPECT_EQ(out_.Take(1), I64(3) + Str("/a") + Str("/b") + Str("init/"));
  ASSERT_TRUE(Run(1, Make(Op::kMultiGet, {"/a", "missing", "/b"})).ok());
  EXPECT_EQ(out_.Take(1), Str("1") + Str("") + Str("2"));
  ASSERT_TRUE(Run(1, Make(Op::kAppend, {"/a"}, {"xy"})).ok());
  ASSERT_TRUE(Run(1, Make(Op::kGet, {"/a"})).ok());
  EXPECT_EQ(out_.Take(1), Str("1xy"));
}

// A MULTI_GET reply is handed to the outbox as views of the stored value, not
// assembled: naming a key 1000 times costs 1000 views, and the outbox (the
// connection) can refuse the whole reply from its size before copying it.
TEST_F(StoreStateTest, MultiGetPassesStoredValuesWithoutCopyingThem) {
  const std::string big(1024 * 1024, 'v');
  ASSERT_TRUE(Run(1, Make(Op::kSet, {"k"}, {big})).ok());
  ASSERT_TRUE(Run(1, Make(Op::kGet, {"k"})).ok());
  ASSERT_EQ(out_.last_parts.size(), 2u);
  const char* stored = out_.last_parts[1].data();
  out_.Take(1);
  ASSERT_TRUE(Run(1, Make(Op::kMultiGet, std::vector<std::string>(1000, "k"))).ok());
  size_t views_of_stored = 0, bytes = 0;
  for (std::string_view part : out_.last_parts) {
    bytes += part.size();
    if (part.data() == stored && part.size() == big.size()) ++views_of_stored;
  }
  EXPECT_EQ(views_of_stored, 1000u);
  EXPECT_EQ(bytes, 1000 * (8 + big.size()));
  std::string reply = out_.Take(1);
  ASSERT_EQ(reply.size(), bytes);
  EXPECT_EQ(reply.substr(0, 8 + big.size()), Str(big));
}

// APPEND grows the stored value where it is (amortised by the string's
// geometric capacity growth) and tells watchers the old value as its prefix.
TEST_F(StoreStateTest, AppendGrowsTheValueInPlace) {
  ASSERT_TRUE(Run(2, Make(Op::kWatchKey, {"log"})).ok());
  out_.Take(2);
  ASSERT_TRUE(Run(1, Make(Op::kSet, {"log"}, {"ab"})).ok());
  out_.Take(2);
  ASSERT_TRUE(Run(1, Make(Op::kAppend, {"log"}, {"cd"})).ok());
  EXPECT_EQ(out_.Take(2), std::string(1, static_cast<char>(kWatchKeyAppended)) + Str("log") +
                              Str("ab") + Str("abcd"));
  state_.DropConnection(2);
  ASSERT_TRUE(Run(1, Make(Op::kSet, {"log"}, {std::string(32 * 1024 * 1024, 'a')})).ok());
  ASSERT_TRUE(Run(1, Make(Op::kAppend, {"log"}, {std::string(1024, 'x')})).ok());
  ASSERT_TRUE(Run(1, Make(Op::kGet, {"log"})).ok());
  const char* after_first = out_.last_parts[1].data();
  out_.Take(1);
  absl::Time start = absl::Now();
  for (int i = 1; i < 300; ++i) {
    ASSERT_TRUE(Run(1, Make(Op::kAppend, {"log"}, {std::string(1024, 'x')})).ok());
  }
  absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(Run(1, Make(Op::kGet, {"log"})).ok());
  EXPECT_EQ(out_.last_parts[1].data(), after_first) << "the value moved: it was copied";
  EXPECT_EQ(out_.last_parts[1].size(), 32u * 1024 * 1024 + 300 * 1024);
  // Each copy of 32 MiB costs milliseconds; 299 of them would take seconds.
  EXPECT_LT(took, absl::Milliseconds(500));
}

TEST(StoreStateLimit, AWriteThatWouldPassTheTotalLimitFailsAndStoresNothing) {
  // Issue 31 item 7: the store had no total limit (400 k keys: 454 MB).
  RecordingOutbox out;
  StoreState state(&out, /*max_bytes=*/100);
  auto run = [&](Request r) { return state.Execute(1, r); };
  ASSERT_TRUE(run(Make(Op::kSet, {"k"}, {std::string(50, 'x')})).ok());
  EXPECT_EQ(state.bytes(), 51u);
  ASSERT_TRUE(run(Make(Op::kSet, {"k"}, {std::string(90, 'y')})).ok());  // replaces: 91
  EXPECT_EQ(state.bytes(), 91u);
  absl::Status full = run(Make(Op::kSet, {"other"}, {std::string(10, 'z')}));
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_NE(full.message().find("this SET of key 'other' would add 15, past the limit of 100 "
                                "bytes (--store-max-bytes)"),
            std::string::npos)
      << full;
  for (Request r : {Make(Op::kAppend, {"k"}, {std::string(10, 'a')}),
                    Make(Op::kQueuePush, {"q"}, {std::string(9, 'a')}),
                    Make(Op::kMultiSet, {"a", "b"}, {"12345", "12345"}),
                    Make(Op::kCompareSet, {"c"}, {"", std::string(9, 'a')}),
                    Make(Op::kAdd, {"counter"}, {}, 1)}) {
    EXPECT_TRUE(absl::IsResourceExhausted(run(r))) << OpName(r.op);
  }
  EXPECT_EQ(state.bytes(), 91u);
  EXPECT_EQ(state.num_keys(), 1u);
  // Reads still work; deleting makes room again.
  ASSERT_TRUE(run(Make(Op::kGet, {"k"})).ok());
  ASSERT_TRUE(run(Make(Op::kDeleteKey, {"k"})).ok());
  EXPECT_EQ(state.bytes(), 0u);
  ASSERT_TRUE(run(Make(Op::kQueuePush, {"q"}, {"abc"})).ok());
  ASSERT_TRUE(run(Make(Op::kAppend, {"k"}, {"abc"})).ok());
  ASSERT_TRUE(run(Make(Op::kAppend, {"k"}, {"de"})).ok());
  ASSERT_TRUE(run(Make(Op::kBarrier, {"b"}, {}, 5)).ok());
  EXPECT_EQ(state.bytes(), (1u + 3) + (1 + 5) + (1 + 1));
  ASSERT_TRUE(run(Make(Op::kQueuePop, {"q"})).ok());
  EXPECT_EQ(state.bytes(), (1u + 5) + (1 + 1));
}

}  // namespace
}  // namespace muster::c10d
