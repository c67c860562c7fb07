// Early returns on an error status, as absl's own code writes them internally (abseil does
// not export these macros): one spelling for the whole tree instead of hand-written
// `if (!x.ok()) return x.status();` at every call.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function unless ok.
#define PLACER_RETURN_IF_ERROR(expr)                                        \
  do {                                                                      \
    if (::absl::Status placer_status_ = (expr); !placer_status_.ok()) {     \
      return placer_status_;                                                \
    }                                                                       \
  } while (false)

// Evaluates `expr` (an absl::StatusOr<T>); returns its status from the enclosing function
// unless ok, else moves the value into `lhs` (a declaration such as `auto x` or an lvalue).
#define PLACER_ASSIGN_OR_RETURN(lhs, expr) \
  PLACER_ASSIGN_OR_RETURN_IMPL_(PLACER_STATUS_CONCAT_(placer_statusor_, __LINE__), lhs, expr)

#define PLACER_STATUS_CONCAT_INNER_(a, b) a##b
#define PLACER_STATUS_CONCAT_(a, b) PLACER_STATUS_CONCAT_INNER_(a, b)
#define PLACER_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)
