#include "rendezvous/wire/status_convert.h"

#include <string>

namespace muster::rdzv::wire {

absl::StatusCode ToAbslCode(int code) {
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::StatusCode::kUnknown;
  }
  return static_cast<absl::StatusCode>(code);
}

int ToWireCode(absl::StatusCode code) { return static_cast<int>(code); }

absl::Status ToAbslStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(ToAbslCode(static_cast<int>(status.error_code())), status.error_message());
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace muster::rdzv::wire
