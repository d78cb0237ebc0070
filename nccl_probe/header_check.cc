// Compiled only when the CUDA headers are found (MUSTER_CUDA_HEADERS): proves
// that driver_abi.h, which the probe is built from everywhere, matches the
// real cuda.h / nvml.h / nccl.h. Each X-macro list is expanded twice: once in
// muster::abi (our types) by the loaders, once here in a namespace whose type
// names alias the real ones, so `&::cuInit` must have exactly the signature we
// dlsym it as. Produces no code.
#include <cstddef>
#include <type_traits>

#include "nccl_probe/driver_abi.h"

#if __has_include(<cuda.h>)
#include <cuda.h>
namespace muster::header_check::cuda {
using CUresult = ::CUresult;
using CUdevice = ::CUdevice;
using CUdeviceptr = ::CUdeviceptr;
using CUcontext = ::CUcontext;
using CUstream = ::CUstream;
#define MUSTER_CHECK_SIGNATURE(name, ret, params) \
  static_assert(std::is_same_v<decltype(&::name), ret(*) params>, #name);
MUSTER_CUDA_FUNCTIONS(MUSTER_CHECK_SIGNATURE)
#undef MUSTER_CHECK_SIGNATURE
static_assert(sizeof(::CUresult) == sizeof(abi::CUresult));
static_assert(sizeof(::CUdevice) == sizeof(abi::CUdevice));
static_assert(sizeof(::CUdeviceptr) == sizeof(abi::CUdeviceptr));
static_assert(::CUDA_SUCCESS == abi::kCudaSuccess);
static_assert(::CUDA_ERROR_NO_DEVICE == abi::kCudaErrorNoDevice);
static_assert(::CU_STREAM_NON_BLOCKING == abi::kCuStreamNonBlocking);
}  // namespace muster::header_check::cuda
#endif

#if __has_include(<nvml.h>)
#include <nvml.h>
namespace muster::header_check::nvml {
using nvmlReturn_t = ::nvmlReturn_t;
using nvmlDevice_t = ::nvmlDevice_t;
using nvmlMemory_t = ::nvmlMemory_t;
using nvmlPciInfo_t = ::nvmlPciInfo_t;
using nvmlProcessInfo_t = ::nvmlProcessInfo_t;
using nvmlMemoryErrorType_t = ::nvmlMemoryErrorType_t;
using nvmlEccCounterType_t = ::nvmlEccCounterType_t;
#define MUSTER_CHECK_SIGNATURE(name, ret, params) \
  static_assert(std::is_same_v<decltype(&::name), ret(*) params>, #name);
MUSTER_NVML_FUNCTIONS(MUSTER_CHECK_SIGNATURE)
#undef MUSTER_CHECK_SIGNATURE
static_assert(sizeof(::nvmlReturn_t) == sizeof(abi::nvmlReturn_t));
static_assert(::NVML_SUCCESS == abi::kNvmlSuccess);
static_assert(::NVML_ERROR_NOT_SUPPORTED == abi::kNvmlErrorNotSupported);
static_assert(::NVML_ERROR_NOT_FOUND == abi::kNvmlErrorNotFound);
static_assert(::NVML_ERROR_INSUFFICIENT_SIZE == abi::kNvmlErrorInsufficientSize);
static_assert(::NVML_MEMORY_ERROR_TYPE_CORRECTED == abi::kNvmlMemoryErrorCorrected);
static_assert(::NVML_MEMORY_ERROR_TYPE_UNCORRECTED == abi::kNvmlMemoryErrorUncorrected);
static_assert(::NVML_VOLATILE_ECC == abi::kNvmlVolatileEcc);
static_assert(NVML_DEVICE_NAME_V2_BUFFER_SIZE == abi::kNvmlNameBufferSize);
static_assert(NVML_DEVICE_UUID_V2_BUFFER_SIZE <= abi::kNvmlUuidBufferSize);
static_assert(NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE == abi::kNvmlDriverVersionBufferSize);
static_assert(NVML_VALUE_NOT_AVAILABLE == abi::kNvmlValueNotAvailable);
static_assert(sizeof(::nvmlMemory_t) == sizeof(abi::nvmlMemory_t));
static_assert(sizeof(::nvmlPciInfo_t) == sizeof(abi::nvmlPciInfo_t));
static_assert(offsetof(::nvmlPciInfo_t, busId) == offsetof(abi::nvmlPciInfo_t, busId));
static_assert(sizeof(::nvmlProcessInfo_t) == sizeof(abi::nvmlProcessInfo_t));
static_assert(offsetof(::nvmlProcessInfo_t, usedGpuMemory) ==
              offsetof(abi::nvmlProcessInfo_t, usedGpuMemory));
}  // namespace muster::header_check::nvml
#endif

#if __has_include(<nccl.h>)
#include <nccl.h>
namespace muster::header_check::nccl {
using ncclResult_t = ::ncclResult_t;
using ncclComm_t = ::ncclComm_t;
using ncclDataType_t = ::ncclDataType_t;
using ncclRedOp_t = ::ncclRedOp_t;
using CUstream = ::cudaStream_t;
#define MUSTER_CHECK_SIGNATURE(name, ret, params) \
  static_assert(std::is_same_v<decltype(&::name), ret(*) params>, #name);
MUSTER_NCCL_FUNCTIONS(MUSTER_CHECK_SIGNATURE)
#undef MUSTER_CHECK_SIGNATURE
static_assert(sizeof(::ncclResult_t) == sizeof(abi::ncclResult_t));
static_assert(sizeof(::ncclDataType_t) == sizeof(abi::ncclDataType_t));
static_assert(sizeof(::ncclRedOp_t) == sizeof(abi::ncclRedOp_t));
static_assert(::ncclSuccess == abi::kNcclSuccess);
static_assert(::ncclFloat32 == abi::kNcclFloat32);
static_assert(::ncclSum == abi::kNcclSum);
}  // namespace muster::header_check::nccl
#endif
