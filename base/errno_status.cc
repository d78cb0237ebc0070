#include "base/errno_status.h"

#include <cerrno>

namespace muster {

absl::Status ErrnoStatus(std::string_view call, int err) {
  // absl appends ": <strerror>" itself.
  return absl::ErrnoToStatus(err, absl::string_view(call.data(), call.size()));
}

}  // namespace muster
