// RMSNorm's and the residual add's rows (row_kernels.h): the AVX-512 path gives the scalar path's
// bits (RMSNorm) and ATen's (the add) in float32 and BF16, for every tail length, a decode
// step's one row and a prompt chunk's many (spread over the helpers), wide and tiny values,
// infinities and NaN; a row's result is the same alone and among others, and in any shape or
// layout (the scalar path checked on every CPU, the vector one where it runs); other operands are
// left to ATen.
#include "model/row_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/tensor_ops.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

// Bitwise equality, NaN where the other is NaN (whatever its bits: ATen's vectorized BF16
// conversion writes 0xFFFF, c10::BFloat16's scalar one 0x7FC0).
void ExpectSameBits(const at::Tensor& got, const at::Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_EQ(got.scalar_type(), want.scalar_type());
  const at::Tensor nan = at::isnan(got);
  EXPECT_TRUE(at::equal(nan, at::isnan(want)));
  const at::ScalarType bits = got.scalar_type() == at::kFloat ? at::kInt : at::kShort;
  const at::Tensor differ = (got.contiguous().view(bits) != want.contiguous().view(bits)).logical_and(nan.logical_not());
  EXPECT_EQ(differ.sum().item<int64_t>(), 0);
}

// Random rows over many binades, with zeros, infinities and a NaN in the first rows.
at::Tensor Rows(int64_t rows, int64_t width, int seed, at::ScalarType dtype) {
  at::Tensor x = SeededRandn({rows, width}, seed) *
                 at::pow(2.0, SeededRandn({rows, width}, seed + 1).mul(4).round());
  const float inf = std::numeric_limits<float>::infinity();
  if (rows > 1 && width > 2) {
    x.index_put_({0, 0}, 0.0f);
    x.index_put_({0, width - 1}, -0.0f);
    x.index_put_({1, width / 2}, inf);
  }
  if (rows > 2) x.index_put_({2, width - 1}, std::numeric_limits<float>::quiet_NaN());
  return x.to(dtype);
}

class RowKernels : public testing::Test {
 protected:
  void SetUp() override {
    if (!RowKernelsVectorRuns()) GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL: the scalar rows run";
  }
};

TEST_F(RowKernels, RmsNormVectorRowsAreTheScalarRowsBitForBit) {
  int seed = 1;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t width : {1, 15, 16, 17, 33, 768, 2048, 5635}) {
      for (int64_t rows : {1, 3, 64}) {
        SCOPED_TRACE(testing::Message() << dtype << " width " << width << " rows " << rows);
        const at::Tensor x = Rows(rows, width, ++seed, dtype);
        const at::Tensor w = SeededRandn({width}, ++seed).to(dtype);
        ExpectSameBits(RmsNormRows(x, w, 1e-6, /*vector=*/true), RmsNormRows(x, w, 1e-6, /*vector=*/false));
      }
    }
  }
}

// The tests below run on every CPU: the scalar rows where AVX-512 is missing.
TEST(RowKernelsAnyCpu, RmsNormMatchesFloat64) {
  // The scalar and vector rows are checked against each other above; here both against the
  // definition, on finite rows of a prompt chunk's size.
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor x = SeededRandn({64, 768}, 70).to(dtype);
    const at::Tensor w = SeededRandn({768}, 71).to(dtype);
    const at::Tensor x64 = x.to(at::kDouble);
    const at::Tensor want = w.to(at::kDouble) * x64 * at::rsqrt(x64.pow(2).mean(-1, true) + 1e-6);
    const at::Tensor got = RmsNormRows(x, w, 1e-6).to(at::kDouble);
    const double tolerance = dtype == at::kFloat ? 1e-5 : 2e-2;
    EXPECT_LE(((got - want).abs() / (want.abs() + 1e-3)).max().item<double>(), tolerance) << dtype;
  }
}

TEST(RowKernelsAnyCpu, ARowIsTheSameAloneAndAmongOthers) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor x = SeededRandn({64, 770}, 80).to(dtype);
    const at::Tensor w = SeededRandn({770}, 81).to(dtype);
    const at::Tensor all = RmsNormRows(x, w, 1e-5);
    for (int64_t r : {0, 31, 63}) ExpectSameBits(RmsNormRows(x.narrow(0, r, 1), w, 1e-5), all.narrow(0, r, 1));
  }
}

TEST(RowKernelsAnyCpu, RmsNormOfAnyShapeOrLayoutIsItsRowsNorm) {
  // [rows, width] contiguous is taken as it is; any other shape or layout is flattened first.
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor x = SeededRandn({6, 768}, 90).to(dtype);
    const at::Tensor w = SeededRandn({768}, 91).to(dtype);
    const at::Tensor rows = RmsNormRows(x, w, 1e-6);
    const at::Tensor three_d = RmsNormRows(x.view({2, 3, 768}), w, 1e-6);
    ASSERT_EQ(three_d.sizes(), (std::vector<int64_t>{2, 3, 768}));
    ExpectSameBits(three_d.view({6, 768}), rows);
    const at::Tensor strided = x.t().contiguous().t();  // the same values, column-major
    ASSERT_FALSE(strided.is_contiguous());
    ExpectSameBits(RmsNormRows(strided, w, 1e-6), rows);
  }
}

TEST(RowKernelsAnyCpu, AddIsAtensAddBitForBit) {
  int seed = 100;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t width : {1, 15, 16, 17, 768, 5635}) {
      for (int64_t rows : {1, 3, 64}) {
        SCOPED_TRACE(testing::Message() << dtype << " width " << width << " rows " << rows);
        const at::Tensor a = Rows(rows, width, ++seed, dtype);
        const at::Tensor b = Rows(rows, width, ++seed, dtype);
        if (RowKernelsVectorRuns()) ExpectSameBits(AddRows(a, b, /*vector=*/true), a + b);
        ExpectSameBits(AddRows(a, b, /*vector=*/false), a + b);
      }
    }
  }
}

TEST(RowKernelsOperands, OtherOperandsAreLeftToAten) {
  const at::Tensor a = SeededRandn({4, 6}, 1);
  // Broadcasting, mixed dtypes, a strided view, float64: ATen's result.
  EXPECT_TRUE(at::equal(AddRows(a, SeededRandn({6}, 2), false), a + SeededRandn({6}, 2)));
  EXPECT_TRUE(at::equal(AddRows(a, SeededRandn({4, 6}, 3).to(at::kBFloat16), false),
                        a + SeededRandn({4, 6}, 3).to(at::kBFloat16)));
  EXPECT_TRUE(at::equal(AddRows(a.t(), a.t(), false), a.t() + a.t()));
  EXPECT_TRUE(at::equal(AddRows(a.to(at::kDouble), a.to(at::kDouble), false), a.to(at::kDouble) * 2));
  EXPECT_FALSE(RmsNormRowsApplies(a.to(at::kDouble), SeededRandn({6}, 4).to(at::kDouble)));
  EXPECT_FALSE(RmsNormRowsApplies(a, SeededRandn({6}, 4).to(at::kBFloat16)));
  EXPECT_FALSE(RmsNormRowsApplies(a, SeededRandn({5}, 4)));
  // RmsNorm's general form still serves what the rows do not take.
  const at::Tensor x64 = a.to(at::kDouble);
  const at::Tensor w64 = SeededRandn({6}, 5).to(at::kDouble);
  EXPECT_TRUE(at::allclose(RmsNorm(x64, w64, 1e-6), w64 * x64 * at::rsqrt(x64.pow(2).mean(-1, true) + 1e-6)));
}

}  // namespace
}  // namespace placer::model
