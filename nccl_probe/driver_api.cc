#include "nccl_probe/driver_api.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace muster::probe {
namespace {

#define MUSTER_BIND_SYMBOL(name, ret, params) RETURN_IF_ERROR(api->library.Bind(#name, &api->name));

template <typename Api>
absl::StatusOr<std::unique_ptr<Api>> Open(const std::string& path) {
  ASSIGN_OR_RETURN(SharedLibrary library, SharedLibrary::Open(path));
  return std::make_unique<Api>(std::move(library));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaApi>> CudaApi::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaApi> api, Open<CudaApi>(path));
  MUSTER_CUDA_FUNCTIONS(MUSTER_BIND_SYMBOL)
  return api;
}

std::string CudaApi::ErrorName(abi::CUresult result) const {
  const char* name = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(result, &name) != 0 || name == nullptr) {
    name = "CUDA_ERROR_?";
  }
  return absl::StrCat(name, " (", result, ")");
}

absl::Status CudaApi::Check(abi::CUresult result, const char* call) const {
  if (result == abi::kCudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", ErrorName(result)));
}

absl::StatusOr<std::unique_ptr<NvmlApi>> NvmlApi::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<NvmlApi> api, Open<NvmlApi>(path));
  MUSTER_NVML_FUNCTIONS(MUSTER_BIND_SYMBOL)
  return api;
}

absl::Status NvmlApi::Check(abi::nvmlReturn_t result, const char* call) const {
  if (result == abi::kNvmlSuccess) return absl::OkStatus();
  const char* text = nvmlErrorString ? nvmlErrorString(result) : nullptr;
  return absl::InternalError(
      absl::StrCat(call, ": ", text ? text : "NVML error", " (", result, ")"));
}

absl::StatusOr<std::unique_ptr<NcclApi>> NcclApi::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<NcclApi> api, Open<NcclApi>(path));
  MUSTER_NCCL_FUNCTIONS(MUSTER_BIND_SYMBOL)
  return api;
}

absl::Status NcclApi::Check(abi::ncclResult_t result, const char* call) const {
  if (result == abi::kNcclSuccess) return absl::OkStatus();
  const char* text = ncclGetErrorString ? ncclGetErrorString(result) : nullptr;
  return absl::InternalError(
      absl::StrCat(call, ": ", text ? text : "NCCL error", " (", result, ")"));
}

#undef MUSTER_BIND_SYMBOL

}  // namespace muster::probe
