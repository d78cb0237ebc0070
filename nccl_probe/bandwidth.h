// Bandwidth arithmetic exactly as nccl-tests reports it, and the message-size
// sweep (nccl-tests' -b/-e/-f). Pure functions; thread-safe.
//
// nccl-tests (doc/PERFORMANCE.md, src/all_reduce.cu):
//   algbw = S / t          S = bytes of the user buffer (count * sizeof(type)),
//                          t = seconds per iteration; GB/s means 1e9 B/s.
//   busbw = algbw * F(n)   F depends on the collective and n ranks:
//     all_reduce                         2 (n - 1) / n
//     all_gather, reduce_scatter, alltoall   (n - 1) / n
//     broadcast, reduce                      1
// busbw is comparable with the hardware's link bandwidth whatever n is, which
// is why the pass/fail threshold (--min-busbw) is written against it. For
// n == 1 all_reduce's busbw is 0: a single GPU moves nothing over a bus.
#ifndef MUSTER_NCCL_PROBE_BANDWIDTH_H_
#define MUSTER_NCCL_PROBE_BANDWIDTH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace muster::probe {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce };

// F(n) above. ranks < 1 yields 0.
double BusBwFactor(Collective collective, int ranks);

// algbw in GB/s (1e9); 0 when seconds <= 0.
double AlgBwGBps(uint64_t bytes, double seconds);

// busbw in GB/s = AlgBwGBps(bytes, seconds) * BusBwFactor(collective, ranks).
double BusBwGBps(Collective collective, uint64_t bytes, double seconds, int ranks);

// min, min*factor, ... up to and including max (nccl-tests -b min -e max -f
// factor). InvalidArgument when min == 0, min > max or factor < 2.
absl::StatusOr<std::vector<uint64_t>> MessageSizes(uint64_t min_bytes, uint64_t max_bytes,
                                                   uint64_t factor);

// "8", "64K", "128M", "1G" (binary multiples, as nccl-tests' -b/-e parse them;
// "KiB"/"MB"-style suffixes accepted with the same meaning).
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// Inverse for reports: 1073741824 -> "1G", 1536 -> "1536".
std::string FormatByteSize(uint64_t bytes);

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_BANDWIDTH_H_
