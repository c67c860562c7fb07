// The batch-invariance check the prompt-chunk kernels' tests share: a row's outputs are the same
// bits whether it is multiplied alone, inside a chunk starting at another row, or with the
// product's tasks over one or two threads.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>

#include "model/causal_lm.h"

namespace placer::model {

// `product` maps rows [n, in] to [n, out]; x has at least 45 rows (the shifted chunk is rows
// 5-44).
inline void ExpectEachRowTheSameAloneInAnyChunkAndAtEitherThreadCount(
    const std::function<at::Tensor(const at::Tensor&)>& product, const at::Tensor& x) {
  const int64_t rows = x.size(0);
  ASSERT_GE(rows, 45);
  const int threads = ComputeThreads();
  SetComputeThreads(2);
  const at::Tensor whole = product(x);
  const at::Tensor shifted = product(x.narrow(0, 5, 40));
  SetComputeThreads(1);
  const at::Tensor one_thread = product(x);
  SetComputeThreads(threads);
  EXPECT_TRUE(at::equal(whole, one_thread));
  for (int64_t r = 0; r < rows; ++r) {
    const at::Tensor alone = product(x.narrow(0, r, 1));
    ASSERT_TRUE(at::equal(alone[0], whole[r])) << "row " << r;
    if (r >= 5 && r < 45) {
      ASSERT_TRUE(at::equal(alone[0], shifted[r - 5])) << "row " << r;
    }
  }
}

}  // namespace placer::model
