#include "base/exit_codes.h"

namespace muster::exit_code {

int ForStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:  // EADDRNOTAVAIL: not an address of this machine
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return kUsage;
    default:
      return kTransient;
  }
}

}  // namespace muster::exit_code
