// Lets spdlog/fmt print absl::string_view (absl::Status::message()), which in
// Debian's abseil is its own type, not std::string_view.
#ifndef MUSTER_BASE_LOG_FORMAT_H_
#define MUSTER_BASE_LOG_FORMAT_H_

#include "absl/strings/string_view.h"
#include "spdlog/fmt/fmt.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

#endif  // MUSTER_BASE_LOG_FORMAT_H_
