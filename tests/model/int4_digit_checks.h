// Checks shared by the tests of the three-digit kernels (quantized_int4_digits_test.cc for
// decode rows, quantized_int4_digit_chunks_test.cc and digit_tiles_test.cc for prompt chunks):
// 4-bit weights with offsets, and the bound quantized_int4_digits.h states against a float64
// reference (digit_tiles.h's for 8-bit codes).
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>

#include "loader/quantized_weight.h"
#include "model/quantized_int4_digits.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model::int4_digit_checks {

constexpr double kDigitRange = 127.0 * 65536.0;

// Weights whose rows are shifted by a random mean, so the blocks' offsets are not -8 s.
inline at::Tensor Pack(int64_t out, int64_t in, int64_t group, int seed) {
  const at::Tensor w = SeededRandn({out, in}, seed) + SeededRandn({out, 1}, seed + 1000);
  absl::StatusOr<at::Tensor> packed =
      loader::QuantizeLinearWeight(w, loader::PackedLayout{4, out, in, group}, "w");
  EXPECT_TRUE(packed.ok()) << packed.status();
  return *packed;
}

// Each block's step t = max|x| / (127 · 2^16), repeated over its 128 inputs: [rows, in].
inline at::Tensor Steps(const at::Tensor& x) {
  const int64_t rows = x.size(0), in = x.size(1);
  const at::Tensor blocks = x.to(at::kDouble).abs().reshape({rows, in / kDigitBlock, kDigitBlock});
  return std::get<0>(blocks.max(2)).div(kDigitRange).repeat_interleave(kDigitBlock, 1);
}

// |s| of each weight's block: [out, in].
inline at::Tensor Scales(const at::Tensor& packed) {
  const loader::PackedLayout layout = *loader::PackedLayoutOf(packed);
  at::Tensor scales = at::empty({layout.out, layout.groups()}, at::kDouble);
  const auto* bytes = static_cast<const uint8_t*>(packed.data_ptr());
  for (int64_t b = 0; b < layout.out * layout.groups(); ++b) {
    float s;
    std::memcpy(&s, bytes + b * layout.block_bytes(), sizeof(s));
    scales.view({-1})[b] = std::fabs(static_cast<double>(s));
  }
  return scales.repeat_interleave(layout.group_size, 1);
}

// The header's bound: sum over inputs of 2 · max|q| · |s| · t (30 |s| t for 4-bit codes, 256
// |s| t for 8-bit ones: digit_tiles.h), plus float32 roundings of the terms (the float kernels'
// tolerance in quantized_linear_test.cc).
// `rounding`: the relative error of the output's own rounding (BF16 outputs: 2^-8).
inline void ExpectWithinTheBound(const at::Tensor& y, const at::Tensor& x, const at::Tensor& packed,
                                 const at::Tensor& bias, double rounding = 1e-6) {
  const at::Tensor w64 = loader::DequantizeLinearWeight(packed, at::kFloat).to(at::kDouble);
  const at::Tensor x64 = x.to(at::kDouble);
  at::Tensor reference = at::matmul(x64, w64.t());
  if (bias.defined()) reference = reference + bias.to(at::kDouble);
  const double largest_code = loader::PackedLayoutOf(packed)->bits == 4 ? 15.0 : 128.0;
  const at::Tensor representation = at::matmul(Steps(x), Scales(packed).t()) * (2 * largest_code);
  const at::Tensor magnitude = at::matmul(x64.abs(), w64.abs().t());
  const at::Tensor error = (y.to(at::kDouble) - reference).abs();
  const at::Tensor allowed = reference.abs() * rounding + magnitude * 2e-6 + representation;
  ASSERT_TRUE(at::all(error <= allowed).item<bool>())
      << "worst error " << (error - allowed).max().item<double>() << " beyond the bound";
}

}  // namespace placer::model::int4_digit_checks
