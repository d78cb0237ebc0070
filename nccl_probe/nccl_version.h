// NCCL's version code (ncclGetVersion) decoded and compared. Plain value type.
//
// nccl.h: NCCL_VERSION(X,Y,Z) is X*1000 + Y*100 + Z up to 2.8 and
// X*10000 + Y*100 + Z from 2.9 on, so 2.8.4 -> 2804 and 2.18.1 -> 21801.
#ifndef MUSTER_NCCL_PROBE_NCCL_VERSION_H_
#define MUSTER_NCCL_PROBE_NCCL_VERSION_H_

#include <compare>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace muster::probe {

struct NcclVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;

  static NcclVersion FromCode(int code);
  // "2.18.1" (patch optional: "2.18" == 2.18.0).
  static absl::StatusOr<NcclVersion> Parse(std::string_view text);
  std::string ToString() const;

  auto operator<=>(const NcclVersion&) const = default;
};

// The oldest NCCL the probe accepts by default: 2.17 brought NVLS (NVLink
// SHARP), which the H100 busbw anchors in reference/perf.md §3 assume.
inline constexpr std::string_view kDefaultMinNcclVersion = "2.17.1";

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_NCCL_VERSION_H_
