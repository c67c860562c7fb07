// InPassesOfUpTo: how the packed kernels walk a call's input rows, a compile-time row count per
// pass, so each pass keeps its R accumulators in registers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace placer::model {
namespace row_passes_internal {

template <int N, typename Pass>
inline void PassOf(int64_t count, int64_t first_row, Pass& pass) {
  if constexpr (N > 1) {
    if (count < N) return PassOf<N - 1>(count, first_row, pass);
  }
  pass(std::integral_constant<int, N>{}, first_row);
}

}  // namespace row_passes_internal

// Rows [first, rows) in passes of kMax (the last one shorter): pass(std::integral_constant<int,
// R>{}, first_row) for each, R known at compile time.
template <int kMax, typename Pass>
void InPassesOfUpTo(int64_t rows, Pass&& pass, int64_t first = 0) {
  static_assert(kMax >= 1 && kMax <= 16, "a pass of 1 to 16 rows");
  for (int64_t r = first; r < rows; r += kMax) {
    row_passes_internal::PassOf<kMax>(std::min<int64_t>(kMax, rows - r), r, pass);
  }
}

}  // namespace placer::model
