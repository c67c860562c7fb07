// The float64 reference the F32 linear kernels' tests compare against.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

namespace placer::model {

// y = x @ w^T + b ([out, in] weight) within float32 rounding of a sum of `in` products, scaled
// by their magnitude (|x| @ |w|^T + 1).
inline void ExpectMatchesFloat64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& w,
                                 const at::Tensor& b, const std::string& what) {
  at::Tensor want = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t());
  if (b.defined()) want = want + b.to(at::kDouble);
  const at::Tensor scale = at::matmul(x.abs().to(at::kDouble), w.abs().to(at::kDouble).t()) + 1;
  const double worst = ((y.to(at::kDouble) - want).abs() / scale).max().item<double>();
  EXPECT_LT(worst, 1e-5) << what;
}

}  // namespace placer::model
