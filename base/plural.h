// "1 node", "3 nodes": a count and its noun for messages people read. Header-only, so
// transport-free code (rendezvous/core) uses it without linking base.
#ifndef MUSTER_BASE_PLURAL_H_
#define MUSTER_BASE_PLURAL_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace muster {

inline std::string Plural(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

}  // namespace muster

#endif  // MUSTER_BASE_PLURAL_H_
