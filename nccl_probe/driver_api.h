// The three driver libraries the probe loads at run time, each a table of
// function pointers filled by dlsym (driver_abi.h lists the symbols). Nothing
// from CUDA is linked: a node without a driver runs the same binary.
//
// Each table owns its SharedLibrary; the pointers are valid while it lives.
// Not thread-safe. Load() fails with NotFound when the library cannot be
// opened and Unimplemented naming the first missing symbol.
#ifndef MUSTER_NCCL_PROBE_DRIVER_API_H_
#define MUSTER_NCCL_PROBE_DRIVER_API_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nccl_probe/driver_abi.h"
#include "nccl_probe/shared_library.h"

namespace muster::probe {

// libcuda.so.1: the CUDA driver API.
struct CudaApi : abi::CudaFunctions {
  static absl::StatusOr<std::unique_ptr<CudaApi>> Load(const std::string& path);
  // OK for CUDA_SUCCESS, else Internal("cuInit: CUDA_ERROR_UNKNOWN (999)").
  absl::Status Check(abi::CUresult result, const char* call) const;
  std::string ErrorName(abi::CUresult result) const;

  explicit CudaApi(SharedLibrary lib) : library(std::move(lib)) {}
  SharedLibrary library;
};

// libnvidia-ml.so.1: NVML, for inventory (names, memory, ECC, processes).
struct NvmlApi : abi::NvmlFunctions {
  static absl::StatusOr<std::unique_ptr<NvmlApi>> Load(const std::string& path);
  absl::Status Check(abi::nvmlReturn_t result, const char* call) const;

  explicit NvmlApi(SharedLibrary lib) : library(std::move(lib)) {}
  SharedLibrary library;
};

// libnccl.so.2: version and the all-reduce benchmark.
struct NcclApi : abi::NcclFunctions {
  static absl::StatusOr<std::unique_ptr<NcclApi>> Load(const std::string& path);
  absl::Status Check(abi::ncclResult_t result, const char* call) const;

  explicit NcclApi(SharedLibrary lib) : library(std::move(lib)) {}
  SharedLibrary library;
};

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_DRIVER_API_H_
