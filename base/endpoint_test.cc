#include "base/endpoint.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

constexpr int kDefault = 29400;

std::string Parsed(const std::string& text) {
  absl::StatusOr<Endpoint> e = ParseEndpoint("--flag", text, kDefault);
  if (!e.ok()) return std::string(e.status().message());
  return e->host + " " + std::to_string(e->port);
}

TEST(EndpointTest, EveryForm) {
  EXPECT_EQ(Parsed("node0"), "node0 29400");
  EXPECT_EQ(Parsed("node0.svc:1234"), "node0.svc 1234");
  EXPECT_EQ(Parsed("10.0.0.1:1"), "10.0.0.1 1");
  EXPECT_EQ(Parsed("[::1]:29401"), "::1 29401");
  EXPECT_EQ(Parsed("[::1]"), "::1 29400");
  // A bare IPv6 address is a host without a port, never "::" with port 1.
  EXPECT_EQ(Parsed("::1"), "::1 29400");
  EXPECT_EQ(Parsed("fe80::1"), "fe80::1 29400");
  EXPECT_EQ(Parsed("fe80::1%eth0"), "fe80::1%eth0 29400");
  EXPECT_EQ(Parsed("[fe80::1%eth0]:7"), "fe80::1%eth0 7");
  EXPECT_EQ(Parsed("node0:65535"), "node0 65535");
}

TEST(EndpointTest, ErrorsNameTheFlagAndTheFix) {
  EXPECT_EQ(Parsed("node0:29400:1"),
            "--flag: 'node0:29400:1' is not HOST[:PORT]; write an IPv6 address with a port as "
            "[ADDR]:PORT");
  EXPECT_EQ(Parsed("[::1"), "--flag: '[::1': missing ']' after the IPv6 address");
  EXPECT_EQ(Parsed("[::1]x"), "--flag: '[::1]x': expected :PORT after ']'");
  EXPECT_EQ(Parsed("[]:1"), "--flag: '[]:1' has no host; write HOST[:PORT]");
  EXPECT_EQ(Parsed(":29400"), "--flag: ':29400' has no host; write HOST[:PORT]");
  EXPECT_EQ(Parsed(""), "--flag: '' has no host; write HOST[:PORT]");
  for (const char* bad : {"host:", "host:0", "host:65536", "host:x", "[::1]:"}) {
    std::string port = std::string(bad).substr(std::string(bad).rfind(':') + 1);
    EXPECT_EQ(Parsed(bad), std::string("--flag: '") + bad + "': '" + port +
                               "' is not a port (1..65535); write HOST[:PORT]");
  }
  EXPECT_NE(Parsed("a b:1").find("--flag: 'a b' is not a host name or address"), std::string::npos)
      << Parsed("a b:1");
  EXPECT_EQ(Parsed("n\xF6"
                   "de:1")
                .rfind("--flag: ", 0),
            0u);
}

// torchrun's "any free port" form, where the caller allows it (one node's --rdzv-endpoint).
TEST(EndpointTest, PortZeroWhereTheCallerAllowsIt) {
  absl::StatusOr<Endpoint> e =
      ParseEndpoint("--flag", "localhost:0", 29400, PortZero::kAnyFreePort);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->port, 0);
  EXPECT_EQ(ParseEndpoint("--flag", "h:65536", 1, PortZero::kAnyFreePort).status().message(),
            "--flag: 'h:65536': '65536' is not a port (0..65535); write HOST[:PORT]");
}

TEST(EndpointTest, ToStringBracketsIpv6) {
  EXPECT_EQ((Endpoint{.host = "node0", .port = 1}).ToString(), "node0:1");
  EXPECT_EQ((Endpoint{.host = "::1", .port = 29400}).ToString(), "[::1]:29400");
  EXPECT_EQ(JoinHostPort("[::]", "0"), "[::]:0");
  EXPECT_EQ(JoinHostPort("::", 5), "[::]:5");
  EXPECT_EQ(JoinHostPort("0.0.0.0", 5), "0.0.0.0:5");
  for (const char* text : {"node0:12", "[::1]:12", "10.0.0.1:12", "[fe80::1%eth0]:12"}) {
    EXPECT_EQ(ParseEndpoint("--flag", text, kDefault)->ToString(), text);
  }
}

}  // namespace
}  // namespace muster
