#include "nccl_probe/inventory.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace muster::probe {

bool PidExists(uint32_t pid) {
  if (pid == 0) return false;
  // EPERM: the pid exists but belongs to someone else; only ESRCH means gone.
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

std::optional<std::string> NormalizePciBusId(const std::string& bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  char tail = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4) {
    return std::nullopt;
  }
  return absl::StrFormat("%04x:%02x:%02x.%x", domain, bus, device, function);
}

namespace {

// CUDA ordinal by normalised PCI bus id.
absl::StatusOr<std::map<std::string, int>> CudaOrdinals(const CudaApi& cuda, int count) {
  std::map<std::string, int> ordinals;
  for (int i = 0; i < count; ++i) {
    abi::CUdevice dev = 0;
    RETURN_IF_ERROR(cuda.Check(cuda.cuDeviceGet(&dev, i), "cuDeviceGet"));
    char bus_id[32] = {};
    RETURN_IF_ERROR(
        cuda.Check(cuda.cuDeviceGetPCIBusId(bus_id, sizeof(bus_id), dev), "cuDeviceGetPCIBusId"));
    if (auto id = NormalizePciBusId(bus_id)) ordinals[*id] = i;
  }
  return ordinals;
}

absl::Status QueryProcesses(const NvmlApi& nvml, abi::nvmlDevice_t dev, const PidAliveFn& pid_alive,
                            GpuInfo* gpu) {
  std::vector<abi::nvmlProcessInfo_t> infos(8);
  unsigned int count = 0;
  abi::nvmlReturn_t rc = abi::kNvmlErrorInsufficientSize;
  // The list can grow between calls; a few rounds settle it.
  for (int round = 0; round < 4 && rc == abi::kNvmlErrorInsufficientSize; ++round) {
    count = static_cast<unsigned int>(infos.size());
    rc = nvml.nvmlDeviceGetComputeRunningProcesses_v3(dev, &count, infos.data());
    if (rc == abi::kNvmlErrorInsufficientSize) infos.resize(count + 8);
  }
  RETURN_IF_ERROR(nvml.Check(rc, "nvmlDeviceGetComputeRunningProcesses_v3"));
  for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
    GpuProcess p;
    p.pid = infos[i].pid;
    if (infos[i].usedGpuMemory != abi::kNvmlValueNotAvailable) {
      p.used_bytes = infos[i].usedGpuMemory;
    }
    char name[256] = {};
    // Fails (NOT_FOUND) for a pid that is gone; the name is then unknown.
    if (nvml.nvmlSystemGetProcessName(p.pid, name, sizeof(name)) == abi::kNvmlSuccess) {
      p.name = name;
    }
    p.alive = pid_alive(p.pid);
    gpu->processes.push_back(std::move(p));
  }
  return absl::OkStatus();
}

absl::Status QueryGpu(const NvmlApi& nvml, unsigned int index, const PidAliveFn& pid_alive,
                      GpuInfo* gpu) {
  abi::nvmlDevice_t dev = nullptr;
  RETURN_IF_ERROR(
      nvml.Check(nvml.nvmlDeviceGetHandleByIndex_v2(index, &dev), "nvmlDeviceGetHandleByIndex_v2"));
  char name[abi::kNvmlNameBufferSize] = {};
  RETURN_IF_ERROR(nvml.Check(nvml.nvmlDeviceGetName(dev, name, sizeof(name)), "nvmlDeviceGetName"));
  gpu->name = name;
  char uuid[abi::kNvmlUuidBufferSize] = {};
  RETURN_IF_ERROR(nvml.Check(nvml.nvmlDeviceGetUUID(dev, uuid, sizeof(uuid)), "nvmlDeviceGetUUID"));
  gpu->uuid = uuid;
  abi::nvmlPciInfo_t pci = {};
  RETURN_IF_ERROR(nvml.Check(nvml.nvmlDeviceGetPciInfo_v3(dev, &pci), "nvmlDeviceGetPciInfo_v3"));
  pci.busId[sizeof(pci.busId) - 1] = '\0';
  gpu->pci_bus_id = pci.busId;
  abi::nvmlMemory_t mem = {};
  RETURN_IF_ERROR(nvml.Check(nvml.nvmlDeviceGetMemoryInfo(dev, &mem), "nvmlDeviceGetMemoryInfo"));
  gpu->memory_total_bytes = mem.total;
  gpu->memory_used_bytes = mem.used;
  unsigned long long corrected = 0, uncorrected = 0;
  abi::nvmlReturn_t rc = nvml.nvmlDeviceGetTotalEccErrors(dev, abi::kNvmlMemoryErrorCorrected,
                                                          abi::kNvmlVolatileEcc, &corrected);
  if (rc == abi::kNvmlSuccess) {
    RETURN_IF_ERROR(
        nvml.Check(nvml.nvmlDeviceGetTotalEccErrors(dev, abi::kNvmlMemoryErrorUncorrected,
                                                    abi::kNvmlVolatileEcc, &uncorrected),
                   "nvmlDeviceGetTotalEccErrors"));
    gpu->ecc = EccCounts{corrected, uncorrected};
  } else if (rc != abi::kNvmlErrorNotSupported) {  // NOT_SUPPORTED: ECC off / consumer GPU
    RETURN_IF_ERROR(nvml.Check(rc, "nvmlDeviceGetTotalEccErrors"));
  }
  return QueryProcesses(nvml, dev, pid_alive, gpu);
}

}  // namespace

absl::StatusOr<Inventory> CollectInventory(const CudaApi& cuda, const NvmlApi& nvml,
                                           bool cuda_initialized, const PidAliveFn& pid_alive) {
  Inventory inv;
  RETURN_IF_ERROR(
      cuda.Check(cuda.cuDriverGetVersion(&inv.cuda_driver_version), "cuDriverGetVersion"));
  std::map<std::string, int> cuda_ordinals;
  if (cuda_initialized) {
    RETURN_IF_ERROR(cuda.Check(cuda.cuDeviceGetCount(&inv.cuda_device_count), "cuDeviceGetCount"));
    ASSIGN_OR_RETURN(cuda_ordinals, CudaOrdinals(cuda, inv.cuda_device_count));
  }
  char version[abi::kNvmlDriverVersionBufferSize] = {};
  RETURN_IF_ERROR(nvml.Check(nvml.nvmlSystemGetDriverVersion(version, sizeof(version)),
                             "nvmlSystemGetDriverVersion"));
  inv.driver_version = version;
  unsigned int count = 0;
  RETURN_IF_ERROR(nvml.Check(nvml.nvmlDeviceGetCount_v2(&count), "nvmlDeviceGetCount_v2"));
  for (unsigned int i = 0; i < count; ++i) {
    GpuInfo gpu;
    gpu.index = static_cast<int>(i);
    if (absl::Status s = QueryGpu(nvml, i, pid_alive, &gpu); !s.ok()) {
      gpu.error = std::string(s.message());
    }
    if (auto id = NormalizePciBusId(gpu.pci_bus_id)) {
      if (auto it = cuda_ordinals.find(*id); it != cuda_ordinals.end()) gpu.cuda_index = it->second;
    }
    inv.gpus.push_back(std::move(gpu));
  }
  return inv;
}

}  // namespace muster::probe
