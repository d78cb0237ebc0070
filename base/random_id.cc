#include "base/random_id.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace muster {

std::string RandomHex(int bytes) {
  unsigned char buf[32];
  bytes = std::clamp(bytes, 0, 32);
  if (getrandom(buf, bytes, 0) != bytes) {
    // getrandom on Linux >= 3.17 does not fail for <= 256 bytes; fall back to the clock.
    uint64_t t = absl::ToUnixNanos(absl::Now()) ^ getpid();
    std::memcpy(buf, &t, std::min<size_t>(bytes, sizeof(t)));
  }
  std::string out;
  for (int i = 0; i < bytes; ++i) absl::StrAppendFormat(&out, "%02x", buf[i]);
  return out;
}

std::string Uuid4() {
  std::string h = RandomHex(16);
  h[12] = '4';                        // version 4
  h[16] = "89ab"[(h[16] - '0') & 3];  // RFC 4122 variant
  return absl::StrCat(h.substr(0, 8), "-", h.substr(8, 4), "-", h.substr(12, 4), "-",
                      h.substr(16, 4), "-", h.substr(20, 12));
}

}  // namespace muster
