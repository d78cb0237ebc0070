// Builds the Inventory (report.h) from the loaded driver libraries: NVML for
// every GPU of the node, the CUDA driver for the devices this process can see
// (CUDA_VISIBLE_DEVICES applies), joined by PCI bus id.
//
// Expects cuInit and nvmlInit_v2 to have succeeded (cuda_initialized=false
// when cuInit returned CUDA_ERROR_NO_DEVICE: CUDA then sees no device). A
// query failing on one GPU is recorded in GpuInfo::error, not returned: a lost
// GPU is a finding, not a probe failure.
#ifndef MUSTER_NCCL_PROBE_INVENTORY_H_
#define MUSTER_NCCL_PROBE_INVENTORY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nccl_probe/driver_api.h"
#include "nccl_probe/report.h"

namespace muster::probe {

// Whether a pid exists (the default uses kill(pid, 0)); swapped in tests.
using PidAliveFn = std::function<bool(uint32_t pid)>;
bool PidExists(uint32_t pid);

absl::StatusOr<Inventory> CollectInventory(const CudaApi& cuda, const NvmlApi& nvml,
                                           bool cuda_initialized, const PidAliveFn& pid_alive);

// "00000000:18:00.0" and "0000:18:00.0" name the same device; both normalise
// to "0000:18:00.0". nullopt when `bus_id` is not domain:bus:device.function.
std::optional<std::string> NormalizePciBusId(const std::string& bus_id);

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_INVENTORY_H_
