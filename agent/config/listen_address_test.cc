#include "agent/config/listen_address.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

const ListenWaitFn kNoWait = [](absl::Duration) { return true; };

Config OneNode() { return Config{}; }

Config Joiner(const std::string& endpoint_host) {
  Config c;
  c.rdzv_host_name = endpoint_host;
  c.min_nodes = c.max_nodes = 2;
  return c;
}

TEST(ListenAddressTest, OneNodeBindsMasterAddr) {
  Config c = OneNode();
  EXPECT_EQ(*ListenAddressFor(c, ListenPurpose::kStore, kNoWait), "127.0.0.1");
  c.master_addr = "localhost";
  EXPECT_EQ(*ListenAddressFor(c, ListenPurpose::kStore, kNoWait), "127.0.0.1");
  // The health port follows --local-addr; the store stays where MASTER_ADDR points.
  c.local_addr = "127.0.0.2";
  EXPECT_EQ(*ListenAddressFor(c, ListenPurpose::kNode, kNoWait), "127.0.0.2");
  EXPECT_EQ(*ListenAddressFor(c, ListenPurpose::kStore, kNoWait), "127.0.0.1");
}

TEST(ListenAddressTest, JoinerBindsTheRouteToTheEndpointOrLocalAddr) {
  Config c = Joiner("127.0.0.1");
  EXPECT_EQ(*ListenAddressFor(c, ListenPurpose::kStore, kNoWait), "127.0.0.1");
  EXPECT_EQ(*ListenAddressFor(c, ListenPurpose::kNode, kNoWait), "127.0.0.1");
  c.local_addr = "127.0.0.3";
  EXPECT_EQ(*ListenAddressFor(c, ListenPurpose::kStore, kNoWait), "127.0.0.3");
  EXPECT_EQ(*ListenAddressFor(c, ListenPurpose::kNode, kNoWait), "127.0.0.3");
}

TEST(ListenAddressTest, NeverAWildcard) {
  for (Config c : {OneNode(), Joiner("127.0.0.1"), Joiner("localhost")}) {
    for (ListenPurpose p : {ListenPurpose::kStore, ListenPurpose::kNode}) {
      absl::StatusOr<std::string> a = ListenAddressFor(c, p, kNoWait);
      ASSERT_TRUE(a.ok()) << a.status();
      EXPECT_NE(*a, "::");
      EXPECT_NE(*a, "0.0.0.0");
    }
  }
}

TEST(ListenAddressTest, AnAddressOfAnotherHostIsRefusedNamingTheFlag) {
  Config c = Joiner("127.0.0.1");
  c.local_addr = "192.0.2.77";  // TEST-NET-1: never this host's
  c.sources["local-addr"] = "POD_IP";
  absl::StatusOr<std::string> a = ListenAddressFor(c, ListenPurpose::kStore, kNoWait);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("POD_IP '192.0.2.77' is not an address of this host"),
            absl::string_view::npos)
      << a.status();
  EXPECT_NE(a.status().message().find("127.0.0.1"), absl::string_view::npos) << a.status();
  EXPECT_FALSE(LocalAddressOf("--master-addr", "192.0.2.77").ok());
  EXPECT_EQ(*LocalAddressOf("--master-addr", "127.0.0.1"), "127.0.0.1");
}

TEST(ListenAddressTest, RouteSourceOfALocalAddressIsItself) {
  EXPECT_EQ(*RouteSourceAddress("127.0.0.1", 29400), "127.0.0.1");
  EXPECT_EQ(*RouteSourceAddress("localhost", 29400), "127.0.0.1");
}

TEST(ListenAddressTest, OnlyAFixedJobsNodeRanksAboveZeroNeverServe) {
  Config c = Joiner("10.0.0.1");
  EXPECT_FALSE(NeverServesStore(c));  // no rank: it may be group rank 0
  c.node_rank = 0;
  EXPECT_FALSE(NeverServesStore(c));
  c.node_rank = 1;
  EXPECT_TRUE(NeverServesStore(c));
  c.min_nodes = 1;  // elastic: a round with fewer nodes may place it first
  EXPECT_FALSE(NeverServesStore(c));
  EXPECT_FALSE(NeverServesStore(OneNode()));
}

TEST(ListenAddressTest, ServedEndpointMustResolveToTheListenAddress) {
  Config c = Joiner("127.0.0.1");
  c.local_addr = "127.0.0.2";
  EXPECT_TRUE(CheckServedEndpoint(c, "127.0.0.1").ok());
  absl::Status st = CheckServedEndpoint(c, "127.0.0.2");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("resolves on this host to 127.0.0.1, but this node listens on "
                              "127.0.0.2 (--local-addr)"),
            absl::string_view::npos)
      << st;
  EXPECT_TRUE(CheckServedEndpoint(Joiner("localhost"), "127.0.0.2").ok());
  EXPECT_TRUE(CheckServedEndpoint(Joiner("192.0.2.1"), "127.0.0.2").ok());  // not this host's
}

TEST(ListenAddressTest, ListenEndpointBracketsIpv6) {
  EXPECT_EQ(ListenEndpoint("10.0.0.1", 8081), "10.0.0.1:8081");
  EXPECT_EQ(ListenEndpoint("fd00::1", 8081), "[fd00::1]:8081");
}

}  // namespace
}  // namespace muster
