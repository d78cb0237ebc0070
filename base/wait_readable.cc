#include "base/wait_readable.h"

#include <poll.h>

#include <cerrno>
#include <cstdint>

#include "absl/time/clock.h"

namespace muster {

int WaitReadable(int fd, absl::Time deadline) {
  for (;;) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return 0;
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;  // a signal the caller handles elsewhere
    return r < 0 ? -1 : (r > 0 ? 1 : 0);
  }
}

}  // namespace muster
