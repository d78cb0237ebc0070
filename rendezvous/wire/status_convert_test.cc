// rendezvous/wire/status_convert: every canonical code and its message survive
// absl::Status -> grpc::Status -> absl::Status and the code carried inside a message.
#include "rendezvous/wire/status_convert.h"

#include <string>

#include "gtest/gtest.h"

namespace muster::rdzv::wire {
namespace {

TEST(StatusConvertTest, EveryCodeRoundTrips) {
  for (int code = 0; code <= static_cast<int>(absl::StatusCode::kUnauthenticated); ++code) {
    const auto c = static_cast<absl::StatusCode>(code);
    EXPECT_EQ(ToAbslCode(ToWireCode(c)), c) << code;
    const absl::Status s(c, c == absl::StatusCode::kOk ? "" : "message " + std::to_string(code));
    const grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), code);
    EXPECT_EQ(g.error_message(), std::string(s.message()));
    EXPECT_EQ(ToAbslStatus(g), s) << code;
  }
}

TEST(StatusConvertTest, UnknownWireCodesReadAsUnknown) {
  for (int code : {-1, 17, 1000}) EXPECT_EQ(ToAbslCode(code), absl::StatusCode::kUnknown) << code;
}

}  // namespace
}  // namespace muster::rdzv::wire
