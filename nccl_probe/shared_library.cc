#include "nccl_probe/shared_library.h"

#include <dlfcn.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace muster::probe {

absl::StatusOr<SharedLibrary> SharedLibrary::Open(const std::string& path) {
  dlerror();  // clear a stale error so the message below is ours
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(absl::StrCat("dlopen ", path, ": ", why ? why : "unknown error"));
  }
  return SharedLibrary(path, handle);
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : path_(std::move(other.path_)), handle_(std::exchange(other.handle_, nullptr)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    path_ = std::move(other.path_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

absl::Status SharedLibrary::Lookup(const char* symbol, void** address) const {
  dlerror();
  *address = dlsym(handle_, symbol);
  // A symbol may legitimately be NULL only for data; every symbol we bind is a
  // function, so NULL means missing whatever dlerror() says.
  if (*address == nullptr) {
    return absl::UnimplementedError(absl::StrCat(path_, ": missing symbol ", symbol));
  }
  return absl::OkStatus();
}

}  // namespace muster::probe
