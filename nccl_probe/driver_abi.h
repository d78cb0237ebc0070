// Our own minimal declarations of the CUDA driver, NVML and NCCL ABI: the few
// types, constants and function signatures muster-probe calls through dlsym.
//
// Why our own: the probe must build on machines without the CUDA headers and
// must never link a CUDA library. When the headers are present,
// header_check.cc expands the same X-macro lists against the real headers and
// static_asserts that every signature, constant and struct layout below
// matches; a drift is a compile error there, not a crash on a GPU node.
//
// The function lists name the exact exported symbols (cuMemAlloc_v2, not the
// cuMemAlloc macro) because dlsym sees symbols, not macros.
#ifndef MUSTER_NCCL_PROBE_DRIVER_ABI_H_
#define MUSTER_NCCL_PROBE_DRIVER_ABI_H_

#include <cstddef>

namespace muster::abi {

// ---- CUDA driver API (cuda.h) ----
using CUresult = int;  // enum cudaError_enum; 4 bytes on every ABI we target
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
using CUcontext = CUctx_st*;
struct CUstream_st;
using CUstream = CUstream_st*;  // == cudaStream_t
inline constexpr CUresult kCudaSuccess = 0;
inline constexpr CUresult kCudaErrorNoDevice = 100;
inline constexpr unsigned int kCuStreamNonBlocking = 0x1;

#define MUSTER_CUDA_FUNCTIONS(X)                                          \
  X(cuInit, CUresult, (unsigned int flags))                               \
  X(cuDriverGetVersion, CUresult, (int* version))                         \
  X(cuDeviceGetCount, CUresult, (int* count))                             \
  X(cuDeviceGet, CUresult, (CUdevice * device, int ordinal))              \
  X(cuDeviceGetPCIBusId, CUresult, (char* bus_id, int len, CUdevice dev)) \
  X(cuGetErrorName, CUresult, (CUresult error, const char** name))        \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext * ctx, CUdevice dev))  \
  X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice dev))               \
  X(cuCtxSetCurrent, CUresult, (CUcontext ctx))                           \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr * dptr, size_t bytes))          \
  X(cuMemFree_v2, CUresult, (CUdeviceptr dptr))                           \
  X(cuStreamCreate, CUresult, (CUstream * stream, unsigned int flags))    \
  X(cuStreamSynchronize, CUresult, (CUstream stream))                     \
  X(cuStreamDestroy_v2, CUresult, (CUstream stream))

// ---- NVML (nvml.h) ----
using nvmlReturn_t = int;  // enum nvmlReturn_enum
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
inline constexpr nvmlReturn_t kNvmlSuccess = 0;
inline constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;
inline constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
inline constexpr nvmlReturn_t kNvmlErrorNotFound = 6;
using nvmlMemoryErrorType_t = int;  // enum nvmlMemoryErrorType_enum
inline constexpr nvmlMemoryErrorType_t kNvmlMemoryErrorCorrected = 0;
inline constexpr nvmlMemoryErrorType_t kNvmlMemoryErrorUncorrected = 1;
using nvmlEccCounterType_t = int;  // enum nvmlEccCounterType_enum
inline constexpr nvmlEccCounterType_t kNvmlVolatileEcc = 0;
// Buffer sizes from nvml.h (NVML_DEVICE_NAME_V2_BUFFER_SIZE, ...).
inline constexpr unsigned int kNvmlNameBufferSize = 96;
inline constexpr unsigned int kNvmlUuidBufferSize = 80;
inline constexpr unsigned int kNvmlDriverVersionBufferSize = 80;

// nvmlMemory_t (v1): what nvmlDeviceGetMemoryInfo fills.
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3 (NVML >= 11).
struct nvmlPciInfo_t {
  char busIdLegacy[16];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
};

// VERSIONED: nvmlProcessInfo_t as filled by
// nvmlDeviceGetComputeRunningProcesses_v3 (== nvmlProcessInfo_v2_t). The _v1
// entry point takes a 16-byte struct without the instance ids; binding the
// wrong pair corrupts the array, so the symbol and this layout change together.
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // NVML_VALUE_NOT_AVAILABLE when unknown
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(nvmlProcessInfo_t) == 24);
static_assert(sizeof(nvmlPciInfo_t) == 68);
inline constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

#define MUSTER_NVML_FUNCTIONS(X)                                                                 \
  X(nvmlInit_v2, nvmlReturn_t, (void))                                                           \
  X(nvmlShutdown, nvmlReturn_t, (void))                                                          \
  X(nvmlErrorString, const char*, (nvmlReturn_t result))                                         \
  X(nvmlSystemGetDriverVersion, nvmlReturn_t, (char* version, unsigned int length))              \
  X(nvmlSystemGetProcessName, nvmlReturn_t, (unsigned int pid, char* name, unsigned int length)) \
  X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int* count))                                  \
  X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int index, nvmlDevice_t* device))     \
  X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t device, char* name, unsigned int length))     \
  X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t device, char* uuid, unsigned int length))     \
  X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t device, nvmlPciInfo_t * pci))           \
  X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_t * memory))         \
  X(nvmlDeviceGetTotalEccErrors, nvmlReturn_t,                                                   \
    (nvmlDevice_t device, nvmlMemoryErrorType_t error_type, nvmlEccCounterType_t counter_type,   \
     unsigned long long* count))                                                                 \
  X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlReturn_t,                                       \
    (nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos))

// ---- NCCL (nccl.h) ----
using ncclResult_t = int;  // enum ncclResult_t
struct ncclComm;
using ncclComm_t = ncclComm*;
using ncclDataType_t = int;  // enum ncclDataType_t
using ncclRedOp_t = int;     // enum ncclRedOp_dummy_t / ncclRedOp_t
inline constexpr ncclResult_t kNcclSuccess = 0;
inline constexpr ncclDataType_t kNcclFloat32 = 7;
inline constexpr ncclRedOp_t kNcclSum = 0;

#define MUSTER_NCCL_FUNCTIONS(X)                                                                  \
  X(ncclGetVersion, ncclResult_t, (int* version))                                                 \
  X(ncclGetErrorString, const char*, (ncclResult_t result))                                       \
  X(ncclCommInitAll, ncclResult_t, (ncclComm_t * comms, int ndev, const int* devlist))            \
  X(ncclCommDestroy, ncclResult_t, (ncclComm_t comm))                                             \
  X(ncclGroupStart, ncclResult_t, (void))                                                         \
  X(ncclGroupEnd, ncclResult_t, (void))                                                           \
  X(ncclAllReduce, ncclResult_t,                                                                  \
    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, \
     ncclComm_t comm, CUstream stream))

// One function-pointer member per list entry, named like the symbol.
#define MUSTER_ABI_MEMBER(name, ret, params) ret(*name) params = nullptr;
struct CudaFunctions {
  MUSTER_CUDA_FUNCTIONS(MUSTER_ABI_MEMBER)
};
struct NvmlFunctions {
  MUSTER_NVML_FUNCTIONS(MUSTER_ABI_MEMBER)
};
struct NcclFunctions {
  MUSTER_NCCL_FUNCTIONS(MUSTER_ABI_MEMBER)
};
#undef MUSTER_ABI_MEMBER

}  // namespace muster::abi

#endif  // MUSTER_NCCL_PROBE_DRIVER_ABI_H_
