// Checks shared by the tests of the layouts BF16 linear weights are re-laid out into
// (bf16_tiles_test.cc, bf16_pairs_test.cc): random BF16 operands, a float64 reference, rows
// alone against the batch, refusals' messages.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace placer::model::bf16_layout_checks {

inline at::Tensor RandomBf16(std::vector<int64_t> shape, int seed) {
  at::manual_seed(seed);
  return at::randn(shape, at::TensorOptions().dtype(at::kFloat)).to(at::kBFloat16);
}

// The message of the c10::Error `call` throws, or "no error".
inline std::string ErrorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const c10::Error& e) {
    return std::string(e.what_without_backtrace());
  }
  return "no error";
}

// y (BF16 [rows, out]) against x·wᵀ + bias in float64, bias as the kernel adds it (undefined
// for none): one BF16 rounding of the result plus float32 accumulation over `in` products.
inline void ExpectMatchesFloat64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& w,
                                 const at::Tensor& bias) {
  ASSERT_EQ(y.scalar_type(), at::kBFloat16);
  ASSERT_EQ(y.sizes(), (at::IntArrayRef{x.size(0), w.size(0)}));
  const at::Tensor x64 = x.to(at::kDouble), w64 = w.to(at::kDouble);
  at::Tensor reference = at::matmul(x64, w64.t());
  if (bias.defined()) reference = reference + bias.to(at::kDouble);
  const at::Tensor magnitude = at::matmul(x64.abs(), w64.abs().t());
  const at::Tensor error = (y.to(at::kDouble) - reference).abs();
  const at::Tensor allowed = reference.abs() * std::ldexp(1.0, -8) + magnitude * 1e-6;
  ASSERT_TRUE(at::all(error <= allowed).item<bool>())
      << "worst error " << (error - allowed).max().item<double>() << " beyond";
}

// Each of x's rows (x: [rows, in], rows > 7) gives its row of linear(x) bit for bit alone, and
// after `before` other rows; a [2, 3, in] input keeps its leading dimensions.
inline void ExpectRowsAsInTheBatch(const std::function<at::Tensor(const at::Tensor&)>& linear,
                                   const at::Tensor& x, int64_t before) {
  const int64_t rows = x.size(0);
  const at::Tensor batched = linear(x);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(at::equal(linear(x.narrow(0, r, 1))[0], batched[r])) << r;
    const at::Tensor shifted =
        at::cat({x.narrow(0, (r + 7) % (rows - before + 1), before), x.narrow(0, r, 1)});
    EXPECT_TRUE(at::equal(linear(shifted)[before], batched[r])) << r;
  }
  const int64_t out = batched.size(1);
  const at::Tensor three_d = linear(x.narrow(0, 0, 6).view({2, 3, x.size(1)}));
  EXPECT_EQ(three_d.sizes(), (at::IntArrayRef{2, 3, out}));
  EXPECT_TRUE(at::equal(three_d.view({6, out}), batched.narrow(0, 0, 6)));
}

// linear(x, weight, bias) refuses, naming the operand: float32 rows, rows of the wrong width, a
// plain [out, in] weight (its message containing `not_in_layout`), a bias of the wrong length.
// `packed` is a [32, 64] weight in the layout.
inline void ExpectOperandsRefused(
    const std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>& linear,
    const at::Tensor& packed, const std::string& not_in_layout) {
  const at::Tensor rows = RandomBf16({2, 64}, 7);
  EXPECT_NE(ErrorOf([&] { linear(at::randn({2, 64}), packed, {}); }).find("BF16 [..., 64]"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { linear(RandomBf16({2, 32}, 7), packed, {}); }).find("[..., 64]"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { linear(rows, RandomBf16({32, 64}, 8), {}); }).find(not_in_layout),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { linear(rows, packed, at::randn({31})); }).find("bias"),
            std::string::npos);
}

}  // namespace placer::model::bf16_layout_checks
