// PaddedSgemmLinear: float32 chunks padded with zero rows for OpenBLAS's two-thread split.
#include "model/padded_sgemm.h"

#include <gtest/gtest.h>

#include "model/tensor_ops.h"

namespace placer::model {
namespace {

TEST(SgemmPaddedRows, PadsToSixteensOnlyOnTwoThreadsAndNotJustPastAMultiple) {
  EXPECT_EQ(SgemmPaddedRows(28, 2), 32);
  EXPECT_EQ(SgemmPaddedRows(19, 2), 32);
  EXPECT_EQ(SgemmPaddedRows(40, 2), 48);
  EXPECT_EQ(SgemmPaddedRows(250, 2), 256);
  // Already a multiple, or one or two rows past it: as they are.
  for (int64_t rows : {16, 17, 18, 32, 33, 34, 64, 256}) EXPECT_EQ(SgemmPaddedRows(rows, 2), rows);
  // Few-row chunks, and thread counts not measured (or one, where padding only adds work).
  for (int64_t rows : {1, 5, 15}) EXPECT_EQ(SgemmPaddedRows(rows, 2), rows);
  for (int threads : {0, 1, 3, 4, 16}) EXPECT_EQ(SgemmPaddedRows(28, threads), 28) << threads;
}

at::Tensor Float64Reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  const at::Tensor y = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t());
  return bias.defined() ? y + bias.to(at::kDouble) : y;
}

TEST(PaddedSgemmLinear, PaddedRowsGiveEachRealRowItsOwnProduct) {
  at::manual_seed(5);
  const at::Tensor w = at::randn({130, 96});
  // Leading dimensions kept: 4 x 7 = 28 rows, padded to 32 at two threads.
  const at::Tensor x = at::randn({4, 7, 96});
  for (const at::Tensor& bias : {at::randn({130}), at::Tensor()}) {
    const at::Tensor padded = PaddedSgemmLinear(x, w, bias, 2);
    ASSERT_EQ(padded.sizes(), (at::IntArrayRef{4, 7, 130}));
    EXPECT_TRUE(at::allclose(padded.to(at::kDouble), Float64Reference(x, w, bias), 1e-5, 1e-4));
    // The same rows unpadded (one thread: never padded), and row by row.
    const at::Tensor unpadded = PaddedSgemmLinear(x, w, bias, 1);
    EXPECT_TRUE(at::allclose(padded, unpadded, 1e-5, 1e-5));
    const at::Tensor row = PaddedSgemmLinear(x[2][3].unsqueeze(0), w, bias, 2);
    EXPECT_TRUE(at::allclose(padded[2][3], row[0], 1e-5, 1e-5));
  }
}

TEST(PaddedSgemmLinear, LinearOfALongFloatChunkMatchesFloat64WhateverTheBlasThreads) {
  at::manual_seed(6);
  const at::Tensor w = at::randn({70, 64});
  const at::Tensor bias = at::randn({70});
  for (int64_t rows : {20, 28, 40}) {
    const at::Tensor x = at::randn({rows, 64});
    const at::Tensor y = Linear(x, w, bias);
    ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, 70}));
    EXPECT_TRUE(at::allclose(y.to(at::kDouble), Float64Reference(x, w, bias), 1e-5, 1e-4)) << rows;
  }
}

}  // namespace
}  // namespace placer::model
