#include "rendezvous/grpc/connect.h"

#include "gtest/gtest.h"
#include "rendezvous/grpc/credentials.h"
#include "rendezvous/wire/status_convert.h"

namespace muster::rdzv::grpc_internal {

using wire::ToAbslCode;
using wire::ToAbslStatus;
using wire::ToGrpcStatus;
namespace {

TEST(ParseDialTargetTest, HostPortAndBracketedV6) {
  absl::StatusOr<Endpoint> e = ParseDialTarget("master-0.svc:29400");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->host, "master-0.svc");
  EXPECT_EQ(e->port, 29400);
  e = ParseDialTarget("[fd00::1]:1");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->host, "fd00::1");
  EXPECT_EQ(e->port, 1);
}

TEST(ParseDialTargetTest, RejectsMalformed) {
  for (const char* bad : {"", "host", "host:", ":29400", "host:0", "host:65536", "host:12x",
                          "fd00::1:80", "[fd00::1]80", "[fd00::1"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseDialTarget(bad).status())) << bad;
  }
}

TEST(ConnectTest, StopRequestCancelsAtOnce) {
  absl::Time start = absl::Now();
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = ConnectWithBackoff(
      {.host = "no-such-host.invalid", .port = 1}, grpc::InsecureChannelCredentials(), start,
      start + absl::Seconds(30), [](absl::Duration) { return false; });
  EXPECT_TRUE(absl::IsCancelled(channel.status())) << channel.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(StatusConvertTest, RoundTripsCodeAndMessage) {
  absl::Status s = absl::UnauthenticatedError("bad token");
  grpc::Status g = ToGrpcStatus(s);
  EXPECT_EQ(g.error_code(), grpc::UNAUTHENTICATED);
  EXPECT_EQ(g.error_message(), "bad token");
  EXPECT_EQ(ToAbslStatus(g), s);
  EXPECT_TRUE(ToAbslStatus(grpc::Status::OK).ok());
  EXPECT_EQ(ToAbslCode(99), absl::StatusCode::kUnknown);
}

TEST(CredentialsTest, MissingTlsFilesAreInvalidArgument) {
  EXPECT_TRUE(absl::IsInvalidArgument(
      MakeServerCredentials("/nonexistent/cert.pem", "/nonexistent/key.pem", "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MakeServerCredentials("", "", "/ca.pem").status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(MakeChannelCredentials("/nonexistent/ca.pem", "", "").status()));
}

}  // namespace
}  // namespace muster::rdzv::grpc_internal
