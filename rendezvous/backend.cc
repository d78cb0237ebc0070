#include "rendezvous/backend.h"

namespace muster::rdzv {

const char* BackendName(Backend backend) {
  for (const BackendNameRow& row : kBackendNames) {
    if (row.backend == backend) return row.name.data();
  }
  return "unknown";
}

std::optional<Backend> ParseBackendFlag(std::string_view word) {
  for (const BackendNameRow& row : kBackendNames) {
    if (row.flag && row.name == word) return row.backend;
  }
  return std::nullopt;
}

}  // namespace muster::rdzv
