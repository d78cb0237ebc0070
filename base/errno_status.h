// Converts a failed syscall into an absl::Status that names the call and the
// errno text.
#ifndef MUSTER_BASE_ERRNO_STATUS_H_
#define MUSTER_BASE_ERRNO_STATUS_H_

#include <string_view>

#include "absl/status/status.h"

namespace muster {

// ErrnoStatus("epoll_wait", EINTR) -> Unavailable("epoll_wait: Interrupted
// system call"). The canonical code follows errno (ENOENT -> NotFound, EACCES
// -> PermissionDenied, ...).
absl::Status ErrnoStatus(std::string_view call, int err);

}  // namespace muster

#endif  // MUSTER_BASE_ERRNO_STATUS_H_
