// Checks shared by the tests of the vdpbf16ps kernels over packed codes
// (quantized_int4_bf16_test.cc, quantized_int8_bf16_test.cc): a float64 reference of the exactly
// dequantized weight, and each row alone against any batch.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "loader/quantized_weight.h"

namespace placer::model::packed_bf16_checks {

using PackedProduct =
    std::function<at::Tensor(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& bias)>;

// |y - y64| within one BF16 rounding of y64 plus a few float32 roundings of the terms the kernel
// sums, per weight `terms` ([out, in] float64: |w| where it sums the products as they are, more
// where it sums a biased form of the codes).
inline void ExpectMatchesFloat64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& packed,
                                 const at::Tensor& bias, const at::Tensor& terms) {
  const at::Tensor w64 = loader::DequantizeLinearWeight(packed, at::kFloat).to(at::kDouble);
  const at::Tensor x64 = x.to(at::kDouble);
  at::Tensor reference = at::matmul(x64, w64.t());
  if (bias.defined()) reference = reference + bias.to(at::kDouble);
  const at::Tensor magnitude = at::matmul(x64.abs(), terms.t());
  const at::Tensor error = (y.to(at::kDouble) - reference).abs();
  const at::Tensor allowed = reference.abs() * std::ldexp(1.0, -8) + magnitude * 2e-6;
  ASSERT_TRUE(at::all(error <= allowed).item<bool>())
      << "worst error " << (error - allowed).max().item<double>() << " beyond the tolerance";
}

// Each of x's 16 rows gives the same bits alone, in every batch of the first 2..16 rows, and
// after another row in the call.
inline void ExpectRowsAloneAndInAnyBatch(const PackedProduct& product, const at::Tensor& x,
                                         const at::Tensor& packed, const at::Tensor& bias) {
  ASSERT_EQ(x.size(0), 16);
  std::vector<at::Tensor> alone;
  for (int64_t r = 0; r < 16; ++r) alone.push_back(product(x.narrow(0, r, 1), packed, bias)[0]);
  for (int64_t batch = 2; batch <= 16; ++batch) {
    const at::Tensor y = product(x.narrow(0, 0, batch), packed, bias);
    for (int64_t r = 0; r < batch; ++r) {
      EXPECT_TRUE(at::equal(y[r], alone[static_cast<size_t>(r)])) << "row " << r << " of " << batch;
    }
  }
  const at::Tensor pair = at::cat({x.narrow(0, 5, 1), x.narrow(0, 2, 1)});
  EXPECT_TRUE(at::equal(product(pair, packed, bias)[1], alone[2]));
}

}  // namespace placer::model::packed_bf16_checks
