// Each backend's object: the registry finds every one, the query commands' flags pick and
// configure it, and each names what answers as the commands' lines always have.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/cli/backends/rendezvous_backend.h"
#include "agent/cli/job_query.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

constexpr FlagSpec kQueryOwnFlags[] = {
    {.name = "rdzv-endpoint", .group = "Q", .default_text = "", .help = ""},
    {.name = "rdzv-id", .group = "Q", .default_text = "", .help = ""},
    {.name = "watch", .takes_value = false, .group = "Q", .default_text = "", .help = ""},
};
constexpr auto kQueryFlags = WithJobQueryFlags(kQueryOwnFlags);

const std::map<std::string, std::string> kNoEnv;

FlagValues Flags(const std::vector<std::string>& args) {
  absl::StatusOr<SplitArgs> split = SplitFlags(args, kQueryFlags, "muster status");
  EXPECT_TRUE(split.ok()) << split.status();
  return FlagValues(split.ok() ? *std::move(split) : SplitArgs{}, kNoEnv);
}

absl::StatusOr<std::unique_ptr<JobQuery>> QueryFor(const std::vector<std::string>& args) {
  FlagValues values = Flags(args);
  absl::StatusOr<const RendezvousBackend*> backend = BackendFromFlags(values);
  if (!backend.ok()) return backend.status();
  return (*backend)->Query(values);
}

TEST(BackendsTest, EveryBackendHasItsObject) {
  EXPECT_EQ(&BackendFor(rdzv::Backend::kInProcess), &InProcessBackend());
  EXPECT_EQ(&BackendFor(rdzv::Backend::kGrpc), &GrpcBackend());
  EXPECT_EQ(&BackendFor(rdzv::Backend::kEtcd), &EtcdBackend());
}

TEST(BackendsTest, RdzvBackendPicksTheObject) {
  EXPECT_EQ(*BackendFromFlags(Flags({})), &GrpcBackend());  // muster's own by default
  for (const char* word : {"static", "c10d"}) {
    EXPECT_EQ(*BackendFromFlags(Flags({"--rdzv-backend", word})), &GrpcBackend()) << word;
  }
  for (const char* word : {"etcd", "etcd-v2"}) {
    EXPECT_EQ(*BackendFromFlags(Flags({"--rdzv-backend", word})), &EtcdBackend()) << word;
  }
  absl::StatusOr<const RendezvousBackend*> bad =
      BackendFromFlags(Flags({"--rdzv-backend", "in-process"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_EQ(bad.status().message(),
            "--rdzv-backend: 'in-process' must be c10d, static (muster's own rendezvous), "
            "etcd or etcd-v2");
}

TEST(BackendsTest, GrpcQueryNamesTheServer) {
  absl::StatusOr<std::unique_ptr<JobQuery>> q = QueryFor({"--rdzv-endpoint", "node0"});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)->run_id(), "");  // the server's job list
  EXPECT_EQ((*q)->Where(), "node0:29400");
  EXPECT_EQ((*q)->From(QueryCommand::kStatus), "from node0:29400");
  EXPECT_EQ((*q)->From(QueryCommand::kStacks), "from node0:29400");
  EXPECT_EQ((*q)->From(QueryCommand::kDrain), "at node0:29400");
  q = QueryFor({"--rdzv-endpoint", "node0:7", "--rdzv-id", "j1"});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)->run_id(), "j1");
  q = QueryFor({});
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(), "--rdzv-endpoint: missing; give HOST[:PORT] of the rendezvous");
}

TEST(BackendsTest, EtcdQueryNeedsTheJobAndNamesTheMembers) {
  absl::StatusOr<std::unique_ptr<JobQuery>> q =
      QueryFor({"--rdzv-backend", "etcd", "--rdzv-endpoint", "e1,e2:2380", "--rdzv-id", "j1"});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)->run_id(), "j1");
  EXPECT_EQ((*q)->Where(), "etcd e1:2379,e2:2380");
  EXPECT_EQ((*q)->From(QueryCommand::kStatus), "from etcd");
  EXPECT_EQ((*q)->From(QueryCommand::kStacks), "through etcd e1:2379,e2:2380");
  EXPECT_EQ((*q)->From(QueryCommand::kDrain), "at etcd e1:2379,e2:2380");

  q = QueryFor({"--rdzv-backend", "etcd", "--rdzv-endpoint", "e1"});
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("--rdzv-id: missing; with --rdzv-backend etcd"),
            std::string::npos)
      << q.status();
  q = QueryFor({"--rdzv-backend", "etcd", "--rdzv-endpoint", "e1", "--rdzv-id", "j", "--watch"});
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(),
            "--watch: not with --rdzv-backend etcd yet; run `muster status` again");
}

TEST(BackendsTest, InProcessAnswersNoQuery) {
  absl::StatusOr<std::unique_ptr<JobQuery>> q = InProcessBackend().Query(Flags({}));
  ASSERT_FALSE(q.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(q.status()));
}

}  // namespace
}  // namespace muster
