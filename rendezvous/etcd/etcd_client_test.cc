// EtcdClient against a real etcd (Debian's etcd-server, one member on loopback, data on
// tmpfs); skipped when /usr/bin/etcd is missing (scripts/setup.sh installs it).
#include "rendezvous/etcd/etcd_client.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "muster/v1/etcd.pb.h"
#include "rendezvous/etcd/election.h"
#include "rendezvous/etcd/etcd_test_server.h"
#include "rendezvous/etcd/node_key.h"

namespace muster::rdzv::etcd {
namespace {

// An agent's node key value for node `id` (node_key.h).
std::string NodeValue(const std::string& id) {
  v1::EtcdNode node;
  node.mutable_join()->mutable_node()->set_node_id(id);
  return node.SerializeAsString();
}

class EtcdClientTest : public EtcdServerTest {
 protected:
  // Puts node `id`'s key under `job_prefix` as an agent does; the revision after it.
  int64_t PutNode(const std::string& job_prefix, const std::string& id, int64_t lease) {
    absl::StatusOr<int64_t> put = etcd_->Put(job_prefix + "nodes/" + id, NodeValue(id), lease);
    EXPECT_TRUE(put.ok()) << put.status();
    return put.ok() ? *put : 0;
  }
};

TEST_F(EtcdClientTest, PutRangeDeleteWithRevisions) {
  absl::StatusOr<int64_t> r1 = etcd_->Put("/t/a", "1");
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(etcd_->Put("/t/b", "2").ok());
  ASSERT_TRUE(etcd_->Put("/u", "3").ok());
  absl::StatusOr<RangeResult> got = etcd_->RangePrefix("/t/");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->kvs.size(), 2u);
  EXPECT_EQ(got->kvs[0].key, "/t/a");
  EXPECT_EQ(got->kvs[0].value, "1");
  EXPECT_EQ(got->kvs[0].create_revision, *r1);
  EXPECT_GT(got->revision, *r1);
  ASSERT_TRUE(etcd_->DeletePrefix("/t/").ok());
  EXPECT_TRUE(etcd_->RangePrefix("/t/")->kvs.empty());
  EXPECT_EQ(etcd_->Get("/u")->kvs.size(), 1u);
}

TEST_F(EtcdClientTest, LeaseKeysGoWithTheLease) {
  absl::StatusOr<int64_t> lease = etcd_->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(etcd_->Put("/l/x", "1", *lease).ok());
  absl::StatusOr<absl::Duration> left = etcd_->KeepAliveOnce(*lease);
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_GT(*left, absl::Seconds(3));
  EXPECT_EQ(etcd_->RangePrefix("/l/")->kvs[0].lease, *lease);
  ASSERT_TRUE(etcd_->RevokeLease(*lease).ok());
  EXPECT_TRUE(etcd_->RangePrefix("/l/")->kvs.empty());
  EXPECT_TRUE(absl::IsNotFound(etcd_->KeepAliveOnce(*lease).status()));
}

// A key gone with its lease is read back as of the revision before (the lost
// coordinator's last events, etcd_rendezvous.cc CatchUpOwnEvents).
TEST_F(EtcdClientTest, GetReadsAKeyAsOfARevision) {
  absl::StatusOr<int64_t> lease = etcd_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  const int64_t first = *etcd_->Put("/v/k", "1", *lease);
  ASSERT_TRUE(etcd_->Put("/v/k", "2", *lease).ok());
  ASSERT_TRUE(etcd_->RevokeLease(*lease).ok());
  absl::StatusOr<RangeResult> now = etcd_->Get("/v/k");
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_TRUE(now->kvs.empty());
  absl::StatusOr<RangeResult> before = etcd_->Get("/v/k", now->revision - 1);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->kvs.size(), 1u);
  EXPECT_EQ(before->kvs[0].value, "2");
  EXPECT_EQ(etcd_->Get("/v/k", first)->kvs[0].value, "1");
}

TEST_F(EtcdClientTest, WatchSeesPutsAndDeletesFromARevision) {
  int64_t start = *etcd_->Put("/w/a", "1");
  ASSERT_TRUE(etcd_->Put("/w/b", "2").ok());
  ASSERT_TRUE(etcd_->DeletePrefix("/w/a").ok());
  std::unique_ptr<EtcdWatch> watch = etcd_->WatchPrefix("/w/", start);
  std::vector<WatchEvent> events;
  while (events.size() < 3) {
    ASSERT_TRUE(watch->Next(&events, absl::Seconds(5)).ok());
  }
  EXPECT_EQ(events[0].kv.key, "/w/a");
  EXPECT_FALSE(events[0].deleted);
  EXPECT_EQ(events[1].kv.value, "2");
  EXPECT_TRUE(events[2].deleted);
  // Cancel ends a blocked Next from another thread.
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    watch->Cancel();
  });
  events.clear();
  EXPECT_TRUE(absl::IsCancelled(watch->Next(&events, absl::Seconds(5))));
  canceller.join();
}

TEST_F(EtcdClientTest, PutAllSplitsIntoTransactionsOfAtMost128Puts) {
  // 300 keys: three transactions (etcd refuses more than 128 operations in one).
  absl::StatusOr<int64_t> lease = etcd_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status();
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int i = 0; i < 300; ++i) kvs.emplace_back(absl::StrCat("/t/", 1000 + i), "v");
  const int64_t before = *etcd_->Put("/t-before", "x");
  absl::StatusOr<int64_t> revision = etcd_->PutAll(kvs, *lease);
  ASSERT_TRUE(revision.ok()) << revision.status();
  EXPECT_EQ(*revision, before + 3);  // one revision per transaction
  absl::StatusOr<RangeResult> all = etcd_->RangePrefix("/t/");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->kvs.size(), 300u);
  EXPECT_EQ(all->kvs[299].lease, *lease);
  EXPECT_EQ(etcd_->PutAll({}).status(), absl::OkStatus());
}

TEST_F(EtcdClientTest, OldestIsTheLowestCreateRevision) {
  EXPECT_EQ(*etcd_->Oldest("/o/"), std::nullopt);
  ASSERT_TRUE(etcd_->Put("/o/b", "first").ok());
  ASSERT_TRUE(etcd_->Put("/o/a", "second").ok());
  ASSERT_TRUE(etcd_->Put("/o/b", "rewritten").ok());  // a later put keeps its age
  absl::StatusOr<std::optional<KeyValue>> oldest = etcd_->Oldest("/o/");
  ASSERT_TRUE(oldest.ok() && oldest->has_value()) << oldest.status();
  EXPECT_EQ((*oldest)->key, "/o/b");
  EXPECT_EQ((*oldest)->value, "rewritten");
  ASSERT_TRUE(etcd_->DeletePrefix("/o/b").ok());
  EXPECT_EQ((*etcd_->Oldest("/o/"))->key, "/o/a");
}

TEST_F(EtcdClientTest, WatchOfOneKeyAndOfDeletesOnly) {
  const int64_t start = *etcd_->Put("/k/n1", "a");
  ASSERT_TRUE(etcd_->Put("/k/n10", "sibling with n1 as its prefix").ok());
  ASSERT_TRUE(etcd_->Put("/k/n1", "b").ok());
  ASSERT_TRUE(etcd_->DeletePrefix("/k/n10").ok());
  const int64_t last = *etcd_->Put("/k/n1", "c");
  std::unique_ptr<EtcdWatch> key = etcd_->Watch("/k/n1", start, {.prefix = false});
  std::vector<WatchEvent> events;
  while (events.size() < 3) ASSERT_TRUE(key->Next(&events, absl::Seconds(5)).ok());
  ASSERT_EQ(events.size(), 3u);  // /k/n1's three puts, nothing of /k/n10
  EXPECT_EQ(events[2].kv.value, "c");
  EXPECT_EQ(events[2].kv.mod_revision, last);
  std::unique_ptr<EtcdWatch> gone = etcd_->Watch("/k/", start, {.deletes_only = true});
  events.clear();
  ASSERT_TRUE(gone->Next(&events, absl::Seconds(5)).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].deleted);
  EXPECT_EQ(events[0].kv.key, "/k/n10");
}

TEST_F(EtcdClientTest, WatchOfARangeSeesTwoPrefixesInOneRevisionOrder) {
  // The coordinator's one watch of in/ and nodes/ (coordinator_inbox.h): "job" lies between.
  const int64_t start = *etcd_->Put("/r/in/x", "report");
  ASSERT_TRUE(etcd_->Put("/r/job", "state").ok());
  ASSERT_TRUE(etcd_->Put("/r/nodes/a", "node").ok());
  ASSERT_TRUE(etcd_->Put("/r/to/a", "not in the range").ok());
  ASSERT_TRUE(etcd_->DeletePrefix("/r/nodes/a").ok());
  std::unique_ptr<EtcdWatch> range =
      etcd_->Watch("/r/in/", start, {.range_end = PrefixEnd("/r/nodes/")});
  std::vector<WatchEvent> events;
  while (events.size() < 4) ASSERT_TRUE(range->Next(&events, absl::Seconds(5)).ok());
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kv.key, "/r/in/x");
  EXPECT_EQ(events[1].kv.key, "/r/job");
  EXPECT_EQ(events[2].kv.key, "/r/nodes/a");
  EXPECT_TRUE(events[3].deleted);
  EXPECT_EQ(events[3].kv.key, "/r/nodes/a");
}

TEST_F(EtcdClientTest, TheCoordinatorIsTheNamedOneElseTheOldestNodeKey) {
  GarbageLog garbage;
  const int64_t lease = *etcd_->GrantLease(absl::Seconds(60));
  absl::StatusOr<Elected> none = FindCoordinator(*etcd_, "/e/", garbage);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->node_id, "");
  const int64_t put = PutNode("/e/", "b", lease);
  PutNode("/e/", "a", lease);
  absl::StatusOr<Elected> oldest = FindCoordinator(*etcd_, "/e/", garbage);
  ASSERT_TRUE(oldest.ok()) << oldest.status();
  EXPECT_EQ(oldest->node_id, "b");
  EXPECT_GT(oldest->revision, put);  // a watch from revision + 1 misses nothing after it
  // The named one is read first (one key, not a sorted range of every node key).
  ASSERT_TRUE(NameCoordinator(*etcd_, "/e/", "a", lease, absl::Seconds(2)).ok());
  EXPECT_EQ(FindCoordinator(*etcd_, "/e/", garbage)->node_id, "a");
}

TEST_F(EtcdClientTest, TheElectionPassesOverKeysNoAgentPut) {
  // Issue 31 item 5: a key without a lease under nodes/, or a coordinator key naming no
  // node key on its lease, was taken as the coordinator: every agent waited for it.
  GarbageLog garbage;
  const int64_t lease = *etcd_->GrantLease(absl::Seconds(60));
  const int64_t other = *etcd_->GrantLease(absl::Seconds(60));
  const int64_t junk = *etcd_->Put("/g/nodes/aa-junk", "junk");               // no lease
  ASSERT_TRUE(etcd_->Put("/g/nodes/ab-empty", "", lease).ok());               // no record
  ASSERT_TRUE(etcd_->Put("/g/nodes/ac-bare", NodeValue("ac-bare")).ok());     // no lease
  ASSERT_TRUE(etcd_->Put("/g/nodes/ad-other", NodeValue("zz"), lease).ok());  // not its id
  PutNode("/g/", "b", lease);
  PutNode("/g/", "a", other);
  EXPECT_EQ(FindCoordinator(*etcd_, "/g/", garbage)->node_id, "b");
  // Coordinator keys: without a lease; naming no node; naming garbage; on another lease.
  for (auto [value, on] : std::vector<std::pair<std::string, int64_t>>{
           {"ghost", 0}, {"ghost", lease}, {"aa-junk", lease}, {"a", lease}}) {
    ASSERT_TRUE(etcd_->Put("/g/coordinator", value, on).ok());
    absl::StatusOr<Elected> found = FindCoordinator(*etcd_, "/g/", garbage);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->node_id, "b") << value << " on lease " << on;
  }
  ASSERT_TRUE(NameCoordinator(*etcd_, "/g/", "a", other, absl::Seconds(2)).ok());
  EXPECT_EQ(FindCoordinator(*etcd_, "/g/", garbage)->node_id, "a");
  // A successor that is garbage: the election again.
  EXPECT_EQ(FindNextCoordinator(*etcd_, "/g/", {"aa-junk", junk}, "b", garbage)->node_id, "a");
}

TEST_F(EtcdClientTest, TheNextCoordinatorIsTheSuccessorWhileItsKeyIsTheOneNamed) {
  GarbageLog garbage;
  const int64_t lease = *etcd_->GrantLease(absl::Seconds(60));
  const int64_t b = PutNode("/s/", "b", lease);
  PutNode("/s/", "c", lease);
  // The named successor's key as named: it, at the revision read, with its key.
  absl::StatusOr<Elected> next = FindNextCoordinator(*etcd_, "/s/", {"b", b}, "a", garbage);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->node_id, "b");
  EXPECT_GE(next->revision, b);
  ASSERT_TRUE(next->node_key.has_value());
  EXPECT_EQ(next->node_key->key, "/s/nodes/b");
  // No successor, the lost one itself, or one whose key was made anew: the oldest key.
  ASSERT_TRUE(etcd_->DeletePrefix("/s/nodes/b").ok());
  const int64_t again = PutNode("/s/", "b", lease);
  struct Case {
    Successor successor;
    std::string lost;
  };
  for (const Case& k : {Case{{}, "a"}, Case{{"b", again}, "b"}, Case{{"b", b}, "a"}}) {
    next = FindNextCoordinator(*etcd_, "/s/", k.successor, k.lost, garbage);
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(next->node_id, "c") << k.successor.node_id << "@" << k.successor.create_revision;
    EXPECT_FALSE(next->node_key.has_value());
  }
  // A successor whose key is gone: the oldest key too.
  ASSERT_TRUE(etcd_->DeletePrefix("/s/nodes/b").ok());
  EXPECT_EQ(FindNextCoordinator(*etcd_, "/s/", {"b", again}, "a", garbage)->node_id, "c");
}

TEST_F(EtcdClientTest, FailsOverFromADeadMember) {
  // The first member listed is nobody: calls move on to the live one and stay there.
  auto etcd = EtcdClient::Create(
      {.endpoints = {absl::StrCat("127.0.0.1:", FreeLoopbackPort()), Endpoint()}});
  ASSERT_TRUE(etcd.ok());
  absl::StatusOr<int64_t> put = (*etcd)->Put("/f", "1");
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ((*etcd)->current_endpoint(), Endpoint());
  std::unique_ptr<EtcdWatch> watch = (*etcd)->WatchPrefix("/f", *put);
  std::vector<WatchEvent> events;
  ASSERT_TRUE(watch->Next(&events, absl::Seconds(5)).ok());
  EXPECT_EQ(events[0].kv.value, "1");
}

TEST_F(EtcdClientTest, KeepAliveLeavesAHungMemberAfterPerMember) {
  // The first member listed accepts connections and never answers (listening, never
  // accepting): as a member with no leader yet, the call hangs there until its deadline.
  // A keep-alive must reach the live member while the lease still runs: per_member bounds
  // the wait (without it, the 5 s call timeout: the lease is gone by then, NotFound).
  int hung = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(hung, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(hung, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(hung, 16), 0);
  ASSERT_EQ(getsockname(hung, reinterpret_cast<sockaddr*>(&a), &len), 0);
  auto etcd =
      EtcdClient::Create({.endpoints = {absl::StrCat("127.0.0.1:", ntohs(a.sin_port)), Endpoint()},
                          .call_timeout = absl::Seconds(5)});
  ASSERT_TRUE(etcd.ok());
  absl::StatusOr<int64_t> lease = etcd_->GrantLease(absl::Seconds(5));
  ASSERT_TRUE(lease.ok()) << lease.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<absl::Duration> left = (*etcd)->KeepAliveOnce(*lease, absl::Milliseconds(500));
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  close(hung);
}

TEST_F(EtcdClientTest, NoMemberIsUnavailable) {
  auto etcd = EtcdClient::Create({.endpoints = {absl::StrCat("127.0.0.1:", FreeLoopbackPort())}});
  ASSERT_TRUE(etcd.ok());
  absl::Status s = (*etcd)->Put("/f", "1").status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("etcd (127.0.0.1:"), std::string::npos) << s;
}

}  // namespace
}  // namespace muster::rdzv::etcd
