// Linear's few-row paths (the SmallBatchLinear kernels, or gemv without AVX2: batch-1 and
// batched decode) must give what the general sgemm path gives for the same rows, with and
// without bias, in the shape the caller passed. EmbeddingRows gives at::embedding's rows.
#include "model/tensor_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace placer::model {
namespace {

TEST(EmbeddingRows, AreAtenEmbeddingsRowsForEveryDtypeAndTokenShape) {
  at::manual_seed(3);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor table = at::randn({50, 24}).to(dtype);
    for (const at::Tensor& tokens :
         {at::tensor({7}, at::kLong), at::tensor({0, 49, 7, 7}, at::kLong),
          at::tensor({3, 1, 4, 1, 5, 9}, at::kLong).view({2, 3}),
          at::randint(50, {100}, at::kLong),                       // more than a decode step's
          at::tensor({3, 1}, at::kInt),                            // int32 tokens
          at::tensor({0, 2, 4, 6}, at::kLong).slice(0, 0, 4, 2)}) {  // strided
      SCOPED_TRACE(testing::Message() << dtype << " " << tokens.sizes() << " " << tokens.scalar_type());
      const at::Tensor rows = EmbeddingRows(table, tokens, dtype);
      const at::Tensor want = at::embedding(table, tokens);
      ASSERT_EQ(rows.sizes(), want.sizes());
      EXPECT_EQ(rows.scalar_type(), dtype);
      EXPECT_TRUE(at::equal(rows, want));
    }
    // A token past the table, or negative, is refused as at::embedding refuses it.
    EXPECT_THROW(EmbeddingRows(table, at::tensor({50}, at::kLong), dtype), c10::Error);
    EXPECT_THROW(EmbeddingRows(table, at::tensor({2, -1}, at::kLong), dtype), c10::Error);
  }
}

class LinearOneRow : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    at::manual_seed(7);
    weight_ = at::randn({48, 32});
    if (GetParam()) bias_ = at::randn({48});
    rows_ = at::randn({5, 32});
  }
  at::Tensor weight_, bias_, rows_;
};

TEST_P(LinearOneRow, EqualsTheSameRowInsideABatch) {
  const at::Tensor batch = Linear(rows_, weight_, bias_);
  ASSERT_EQ(batch.sizes(), (at::IntArrayRef{5, 48}));
  for (int64_t r = 0; r < rows_.size(0); ++r) {
    const at::Tensor one = Linear(rows_.slice(0, r, r + 1), weight_, bias_);
    ASSERT_EQ(one.sizes(), (at::IntArrayRef{1, 48}));
    EXPECT_TRUE(at::allclose(one[0], batch[r], /*rtol=*/1e-5, /*atol=*/1e-5)) << "row " << r;
  }
}

TEST_P(LinearOneRow, FewRowsEqualManyRowsBySgemm) {
  // 3 rows take the few-row path, 40 (beyond every few-row limit) sgemm: each row the same.
  const at::Tensor many = at::randn({40, 32});
  const at::Tensor all = Linear(many, weight_, bias_);
  const at::Tensor few = Linear(many.slice(0, 4, 7), weight_, bias_);
  ASSERT_EQ(few.sizes(), (at::IntArrayRef{3, 48}));
  EXPECT_TRUE(at::allclose(few, all.slice(0, 4, 7), 1e-5, 1e-5));
  const at::Tensor want = at::matmul(many, weight_.t()) + (bias_.defined() ? bias_ : at::zeros({48}));
  EXPECT_TRUE(at::allclose(all, want, 1e-5, 1e-5));
  // Rows spread over leading dimensions keep them.
  const at::Tensor batched = Linear(many.slice(0, 0, 6).view({2, 3, 32}), weight_, bias_);
  EXPECT_EQ(batched.sizes(), (at::IntArrayRef{2, 3, 48}));
  EXPECT_TRUE(at::allclose(batched.view({6, 48}), all.slice(0, 0, 6), 1e-5, 1e-5));
}

TEST_P(LinearOneRow, KeepsTheCallersShape) {
  const at::Tensor row = rows_.slice(0, 2, 3);
  const at::Tensor want = at::matmul(row, weight_.t()) + (bias_.defined() ? bias_ : at::zeros({48}));
  const at::Tensor three_d = Linear(row.view({1, 1, 32}), weight_, bias_);
  EXPECT_EQ(three_d.sizes(), (at::IntArrayRef{1, 1, 48}));
  EXPECT_TRUE(at::allclose(three_d.view({1, 48}), want, 1e-5, 1e-5));
  const at::Tensor vector = Linear(row.view({32}), weight_, bias_);
  EXPECT_EQ(vector.sizes(), (at::IntArrayRef{48}));
  EXPECT_TRUE(at::allclose(vector, want.view({48}), 1e-5, 1e-5));
  // A non-contiguous row (a column slice of a wider tensor) goes through the same path.
  const at::Tensor wide = at::cat({rows_, rows_}, 1).slice(0, 2, 3).slice(1, 0, 32);
  EXPECT_TRUE(at::allclose(Linear(wide, weight_, bias_), want, 1e-5, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutBias, LinearOneRow, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Bias") : std::string("NoBias");
                         });

}  // namespace
}  // namespace placer::model

namespace placer::model {
namespace {

// transformers' LlamaRMSNorm, in float64 for the reference.
at::Tensor ReferenceRmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  const at::Tensor x64 = x.to(at::kDouble);
  return w.to(at::kDouble) * (x64 * at::rsqrt(x64.pow(2).mean(-1, true) + eps));
}

TEST(RmsNormFloat, MatchesFloat64ForEveryWidthTailAndShape) {
  at::manual_seed(3);
  for (int64_t width : {1, 7, 16, 17, 768, 771}) {
    for (int64_t rows : {1, 5, 40}) {
      const at::Tensor x = at::randn({rows, width}) * 3;
      const at::Tensor w = at::randn({width});
      const at::Tensor y = RmsNorm(x, w, 1e-6);
      ASSERT_EQ(y.sizes(), x.sizes());
      const double worst = (y.to(at::kDouble) - ReferenceRmsNorm(x, w, 1e-6)).abs().max().item<double>();
      EXPECT_LT(worst, 1e-5 * (1 + w.abs().max().item<double>())) << width << " x " << rows;
    }
  }
  // Leading dimensions and a strided input keep their shape and values.
  const at::Tensor w = at::randn({24});
  const at::Tensor x = at::randn({2, 3, 24});
  EXPECT_TRUE(at::allclose(RmsNorm(x, w, 1e-5), ReferenceRmsNorm(x, w, 1e-5).to(at::kFloat),
                           1e-5, 1e-5));
  const at::Tensor strided = at::randn({24, 4}).t();
  EXPECT_TRUE(at::allclose(RmsNorm(strided, w, 1e-5),
                           ReferenceRmsNorm(strided, w, 1e-5).to(at::kFloat), 1e-5, 1e-5));
  // eps counts: an all-zero row stays zero instead of dividing by zero.
  EXPECT_TRUE(at::equal(RmsNorm(at::zeros({1, 24}), w, 1e-5), at::zeros({1, 24})));
}

TEST(RmsNormFloat, ARowIsTheSameAloneAndInAnyBatch) {
  at::manual_seed(4);
  const at::Tensor x = at::randn({9, 200});
  const at::Tensor w = at::randn({200});
  const at::Tensor batch = RmsNorm(x, w, 1e-6);
  for (int64_t r = 0; r < 9; ++r) {
    EXPECT_TRUE(at::equal(RmsNorm(x.slice(0, r, r + 1), w, 1e-6)[0], batch[r])) << r;
  }
}

// transformers' module on BF16 activations and weight, as ATen computes it: float32 statistics,
// the normalised row rounded to BF16, then the weight multiply in BF16.
at::Tensor AtenBf16RmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  const at::Tensor x32 = x.to(at::kFloat);
  return w * (x32 * at::rsqrt(x32.pow(2).mean(-1, true) + eps)).to(at::kBFloat16);
}

TEST(RmsNormBf16, RoundsAsTransformersModuleForEveryWidthAndShape) {
  at::manual_seed(5);
  for (int64_t width : {1, 7, 16, 17, 64, 768, 2051}) {
    for (int64_t rows : {1, 3, 40}) {
      const at::Tensor x = (at::randn({rows, width}) * 3).to(at::kBFloat16);
      const at::Tensor w = at::randn({width}).to(at::kBFloat16);
      const at::Tensor y = RmsNorm(x, w, 1e-6);
      ASSERT_EQ(y.scalar_type(), at::kBFloat16);
      ASSERT_EQ(y.sizes(), x.sizes());
      // Against float64: two BF16 roundings (the normalised row, the product), 2^-8 each.
      const at::Tensor exact = ReferenceRmsNorm(x, w, 1e-6);
      const double worst =
          ((y.to(at::kDouble) - exact).abs() / (exact.abs() + 1e-30)).max().item<double>();
      EXPECT_LT(worst, 2 * std::ldexp(1.0, -8) + 1e-6) << width << " x " << rows;
      // Against ATen's BF16 arithmetic: the mean of squares is summed in another order, which
      // can move a float32 rounding of the scale and so, rarely, the normalised value by one
      // BF16 step and the product after it by up to two (2^-6 relative at most); everything
      // else is the same bits.
      const at::Tensor aten = AtenBf16RmsNorm(x, w, 1e-6);
      const at::Tensor differs = y.ne(aten);
      EXPECT_LE(differs.sum().item<int64_t>(), std::max<int64_t>(1, x.numel() / 50))
          << width << " x " << rows;
      const double step =
          ((y.to(at::kDouble) - aten.to(at::kDouble)).abs() / (aten.to(at::kDouble).abs() + 1e-30))
              .max().item<double>();
      EXPECT_LE(step, std::ldexp(1.0, -6)) << width << " x " << rows;
    }
  }
  // Leading dimensions and a strided input keep their shape and values.
  const at::Tensor w = at::randn({24}).to(at::kBFloat16);
  const at::Tensor x = at::randn({2, 3, 24}).to(at::kBFloat16);
  EXPECT_TRUE(at::allclose(RmsNorm(x, w, 1e-5).to(at::kFloat),
                           AtenBf16RmsNorm(x, w, 1e-5).to(at::kFloat), 1e-2, 1e-2));
  const at::Tensor strided = at::randn({24, 4}).t().to(at::kBFloat16);
  EXPECT_TRUE(at::allclose(RmsNorm(strided, w, 1e-5).to(at::kFloat),
                           AtenBf16RmsNorm(strided, w, 1e-5).to(at::kFloat), 1e-2, 1e-2));
  EXPECT_TRUE(at::equal(RmsNorm(at::zeros({1, 24}, at::kBFloat16), w, 1e-5),
                        at::zeros({1, 24}, at::kBFloat16)));
}

TEST(RmsNormBf16, ARowIsTheSameAloneAndInAnyBatch) {
  at::manual_seed(6);
  const at::Tensor x = at::randn({9, 2048}).to(at::kBFloat16);
  const at::Tensor w = at::randn({2048}).to(at::kBFloat16);
  const at::Tensor batch = RmsNorm(x, w, 1e-6);
  for (int64_t r = 0; r < 9; ++r) {
    EXPECT_TRUE(at::equal(RmsNorm(x.slice(0, r, r + 1), w, 1e-6)[0], batch[r])) << r;
  }
}

TEST(RmsNormMixedDtypes, KeepATensPromotion) {
  // BF16 activations with a float32 weight: the product promotes to float32, as in PyTorch.
  at::manual_seed(7);
  const at::Tensor x = at::randn({3, 64}).to(at::kBFloat16);
  const at::Tensor w = at::randn({64});
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor want = w * (x32 * at::rsqrt(x32.pow(2).mean(-1, true) + 1e-6)).to(at::kBFloat16);
  const at::Tensor y = RmsNorm(x, w, 1e-6);
  EXPECT_EQ(y.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(y, want));
}

}  // namespace
}  // namespace placer::model
