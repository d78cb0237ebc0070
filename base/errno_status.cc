#include "base/errno_status.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace muster {

absl::Status ErrnoStatus(std::string_view call, int err) {
  std::string message(call);
  message += ": ";
  message += std::strerror(err);
  return absl::ErrnoToStatus(err, message);
}

}  // namespace muster
