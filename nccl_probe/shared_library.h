// A dlopen()ed shared object and typed symbol lookup that names exactly what
// is missing. Owns the handle (dlclose on destruction); move-only; not
// thread-safe (the probe is single-threaded).
#ifndef MUSTER_NCCL_PROBE_SHARED_LIBRARY_H_
#define MUSTER_NCCL_PROBE_SHARED_LIBRARY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace muster::probe {

class SharedLibrary {
 public:
  // dlopen(path, RTLD_NOW | RTLD_LOCAL). NotFound carries dlerror()'s text;
  // the caller decides whether a missing library means "no driver".
  static absl::StatusOr<SharedLibrary> Open(const std::string& path);

  SharedLibrary(SharedLibrary&& other) noexcept;
  SharedLibrary& operator=(SharedLibrary&& other) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary();

  const std::string& path() const { return path_; }

  // Looks up `symbol` and stores it in `*out`. Unimplemented("libcuda.so.1: missing
  // symbol cuInit") when absent. Fn must be a function-pointer type that
  // matches the symbol (driver_abi.h, checked by header_check.cc).
  template <typename Fn>
  absl::Status Bind(const char* symbol, Fn* out) const {
    void* address = nullptr;
    absl::Status status = Lookup(symbol, &address);
    if (status.ok()) *out = reinterpret_cast<Fn>(address);
    return status;
  }

 private:
  SharedLibrary(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}
  absl::Status Lookup(const char* symbol, void** address) const;

  std::string path_;
  void* handle_ = nullptr;
};

}  // namespace muster::probe

#endif  // MUSTER_NCCL_PROBE_SHARED_LIBRARY_H_
