// Linear's few-row paths (the SmallBatchLinear kernels, or gemv without AVX2: batch-1 and
// batched decode) must give what the general sgemm path gives for the same rows, with and
// without bias, in the shape the caller passed.
#include "model/tensor_ops.h"

#include <gtest/gtest.h>

namespace placer::model {
namespace {

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
