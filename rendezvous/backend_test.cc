#include "rendezvous/backend.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

TEST(BackendTest, EveryBackendHasItsOwnName) {
  std::set<std::string> names;
  for (Backend b : kBackends) names.insert(BackendName(b));
  EXPECT_EQ(names, (std::set<std::string>{"in-process", "c10d", "etcd"}));
}

TEST(BackendTest, TheFlagTakesTorchrunsWordsOnly) {
  EXPECT_EQ(ParseBackendFlag("c10d"), Backend::kGrpc);
  EXPECT_EQ(ParseBackendFlag("static"), Backend::kGrpc);
  EXPECT_EQ(ParseBackendFlag("etcd"), Backend::kEtcd);
  EXPECT_EQ(ParseBackendFlag("etcd-v2"), Backend::kEtcd);
  EXPECT_EQ(ParseBackendFlag("in-process"), std::nullopt);  // chosen, never named
  EXPECT_EQ(ParseBackendFlag("zookeeper"), std::nullopt);
  EXPECT_EQ(ParseBackendFlag("ETCD"), std::nullopt);  // torchrun's words are lower case
  EXPECT_EQ(ParseBackendFlag(""), std::nullopt);
}

TEST(BackendTest, EachNameParsesBackWhereTheFlagTakesIt) {
  for (Backend b : kBackends) {
    if (b == Backend::kInProcess) continue;
    EXPECT_EQ(ParseBackendFlag(BackendName(b)), b) << BackendName(b);
  }
}

}  // namespace
}  // namespace muster::rdzv
