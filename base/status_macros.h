// Status propagation macros. Debian's abseil (20220623) ships none, so these
// are ours.
#ifndef MUSTER_BASE_STATUS_MACROS_H_
#define MUSTER_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MUSTER_CONCAT_INNER_(a, b) a##b
#define MUSTER_CONCAT_(a, b) MUSTER_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` yields a non-OK absl::Status.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status muster_status_ = (expr);          \
    if (!muster_status_.ok()) return muster_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(T x, StatusOr<T> expr)`: declares/assigns `x` or returns
// the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  MUSTER_ASSIGN_OR_RETURN_IMPL_(MUSTER_CONCAT_(muster_statusor_, __LINE__), lhs, expr)
#define MUSTER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

#endif  // MUSTER_BASE_STATUS_MACROS_H_
