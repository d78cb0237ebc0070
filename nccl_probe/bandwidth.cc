#include "nccl_probe/bandwidth.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace muster::probe {

double BusBwFactor(Collective collective, int ranks) {
  if (ranks < 1) return 0;
  const double n = ranks;
  switch (collective) {
    case Collective::kAllReduce:
      return 2 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (n - 1) / n;
    case Collective::kBroadcast:
    case Collective::kReduce:
      return 1;
  }
  return 0;
}

double AlgBwGBps(uint64_t bytes, double seconds) {
  if (seconds <= 0) return 0;
  return static_cast<double>(bytes) / 1.0e9 / seconds;
}

double BusBwGBps(Collective collective, uint64_t bytes, double seconds, int ranks) {
  return AlgBwGBps(bytes, seconds) * BusBwFactor(collective, ranks);
}

absl::StatusOr<std::vector<uint64_t>> MessageSizes(uint64_t min_bytes, uint64_t max_bytes,
                                                   uint64_t factor) {
  if (min_bytes == 0 || min_bytes > max_bytes || factor < 2) {
    return absl::InvalidArgumentError(absl::StrCat("message sizes: need 0 < min (", min_bytes,
                                                   ") <= max (", max_bytes, ") and factor (",
                                                   factor, ") >= 2"));
  }
  std::vector<uint64_t> sizes;
  for (uint64_t size = min_bytes; size <= max_bytes; size *= factor) {
    sizes.push_back(size);
    if (size > max_bytes / factor) break;  // the next step would overflow
  }
  return sizes;
}

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  std::string s = absl::AsciiStrToUpper(absl::string_view(text.data(), text.size()));
  uint64_t multiplier = 1;
  if (absl::EndsWith(s, "IB")) {  // "64KiB", "1GiB"
    s.resize(s.size() - 2);
  } else if (absl::EndsWith(s, "B")) {  // "8B", "1GB"
    s.resize(s.size() - 1);
  }
  if (!s.empty()) {
    switch (s.back()) {
      case 'K':
        multiplier = 1ULL << 10;
        break;
      case 'M':
        multiplier = 1ULL << 20;
        break;
      case 'G':
        multiplier = 1ULL << 30;
        break;
      case 'T':
        multiplier = 1ULL << 40;
        break;
      default:
        break;
    }
    if (multiplier != 1) s.pop_back();
  }
  uint64_t value = 0;
  if (s.empty() || !absl::SimpleAtoi(s, &value) || value > UINT64_MAX / multiplier) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid byte size \"", std::string(text), "\" (want e.g. 8, 64K, 128M, 1G)"));
  }
  return value * multiplier;
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr struct {
    uint64_t unit;
    const char* suffix;
  } kUnits[] = {{1ULL << 40, "T"}, {1ULL << 30, "G"}, {1ULL << 20, "M"}, {1ULL << 10, "K"}};
  for (const auto& u : kUnits) {
    if (bytes >= u.unit && bytes % u.unit == 0) {
      return absl::StrCat(bytes / u.unit, u.suffix);
    }
  }
  return absl::StrCat(bytes);
}

}  // namespace muster::probe
