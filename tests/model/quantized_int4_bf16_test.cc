// The 4-bit x BF16 kernel (vdpbf16ps over codes turned into BF16 in registers) against float64
// products of the exactly dequantized weight and the BF16 inputs: groups of 32, 64, 96, 128,
// 256 and one per output row, inputs that end inside a 128-input quad, odd outputs, 1-16 rows,
// BF16 / float32 / no bias, asymmetric offsets; each row bit-identical alone and in any batch;
// QuantizedLinear sending BF16 decode rows of 4-bit weights there, and nothing else.
#include "model/quantized_int4_bf16.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loader/quantized_weight.h"
#include "model/quantized_linear.h"
#include "tests/model/packed_bf16_checks.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

using loader::PackedLayout;

// Weights whose columns are shifted by a random mean, so the blocks' offsets are not -8 s.
at::Tensor Pack(int64_t out, int64_t in, int64_t group, int seed) {
  const at::Tensor w = SeededRandn({out, in}, seed) + SeededRandn({out, 1}, seed + 1000);
  absl::StatusOr<at::Tensor> packed = loader::QuantizeLinearWeight(w, PackedLayout{4, out, in, group}, "w");
  EXPECT_TRUE(packed.ok()) << packed.status();
  return *packed;
}

// The kernel sums the products of the weights as they are: |w| bounds each term.
void ExpectMatchesFloat64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& packed,
                          const at::Tensor& bias) {
  packed_bf16_checks::ExpectMatchesFloat64(
      y, x, packed, bias, loader::DequantizeLinearWeight(packed, at::kFloat).to(at::kDouble).abs());
}

class Int4Bf16 : public testing::Test {
 protected:
  void SetUp() override {
    if (!Int4Bf16KernelRuns()) GTEST_SKIP() << "this CPU lacks AVX-512 BF16";
  }
};

TEST_F(Int4Bf16, ProductsMatchAFloat64Reference) {
  struct Shape {
    int64_t out, in, group;
  };
  // in 96 / 160 / 352: the last quad of 128 inputs is partly past the end.
  const Shape shapes[] = {{1, 32, 32},   {3, 96, 32},    {65, 160, 32},  {7, 128, 64},
                          {9, 192, 96},  {130, 256, 128}, {5, 512, 256}, {11, 352, 352},
                          {17, 384, 128}, {2, 1024, 1024}};
  int seed = 1;
  for (const Shape& shape : shapes) {
    const at::Tensor packed = Pack(shape.out, shape.in, shape.group, ++seed);
    for (int64_t rows : {1, 2, 5, 8, 9, 16}) {
      for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {
        SCOPED_TRACE(testing::Message() << "out " << shape.out << " in " << shape.in << " group "
                                        << shape.group << " rows " << rows << " bias " << bias_kind);
        const at::Tensor x = SeededRandn({rows, shape.in}, ++seed).to(at::kBFloat16);
        at::Tensor bias;
        if (bias_kind > 0) bias = SeededRandn({shape.out}, ++seed);
        if (bias_kind == 2) bias = bias.to(at::kBFloat16);
        ASSERT_TRUE(UsesInt4Bf16Kernel(x, packed, bias));
        const at::Tensor y = QuantizedLinearInt4Bf16(x, packed, bias);
        ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, shape.out}));
        ASSERT_EQ(y.scalar_type(), at::kBFloat16);
        ExpectMatchesFloat64(y, x, packed, bias);
      }
    }
  }
}

TEST_F(Int4Bf16, LargeAndTinyInputsStayWithinTheTolerance) {
  // Inputs over many binades (BF16 keeps float32's exponent range) and exact zeros.
  const at::Tensor packed = Pack(33, 256, 128, 5);
  at::Tensor x = SeededRandn({4, 256}, 6) * at::pow(2.0, SeededRandn({4, 256}, 7).mul(8).round());
  x.index_put_({at::indexing::Slice(), at::indexing::Slice(0, 256, 7)}, 0);
  x = x.to(at::kBFloat16);
  ExpectMatchesFloat64(QuantizedLinearInt4Bf16(x, packed, at::Tensor()), x, packed, at::Tensor());
}

TEST_F(Int4Bf16, ARowIsTheSameAloneAndInAnyBatch) {
  for (int64_t group : {32, 128}) {
    SCOPED_TRACE(testing::Message() << "group " << group);
    const at::Tensor packed = Pack(301, 384, group, 8);
    const at::Tensor x = SeededRandn({16, 384}, 9).to(at::kBFloat16);
    const at::Tensor bias = SeededRandn({301}, 10).to(at::kBFloat16);
    packed_bf16_checks::ExpectRowsAloneAndInAnyBatch(QuantizedLinearInt4Bf16, x, packed, bias);
  }
}

TEST_F(Int4Bf16, QuantizedLinearTakesItForBf16DecodeRowsOfFourBitWeightsOnly) {
  const at::Tensor packed = Pack(40, 256, 128, 11);
  const at::Tensor x = SeededRandn({8, 256}, 12).to(at::kBFloat16);
  ASSERT_LE(8, QuantizedLinearMaxRows(DetectQuantIsa(), *loader::PackedLayoutOf(packed), at::kBFloat16));
  EXPECT_TRUE(at::equal(QuantizedLinear(x, packed, at::Tensor()),
                        QuantizedLinearInt4Bf16(x, packed, at::Tensor())));
  // float32 rows keep the float kernels (their float32 arithmetic), so do 8-bit weights.
  EXPECT_FALSE(UsesInt4Bf16Kernel(x.to(at::kFloat), packed, at::Tensor()));
  absl::StatusOr<at::Tensor> int8 =
      loader::QuantizeLinearWeight(SeededRandn({40, 256}, 13), PackedLayout{8, 40, 256, 256}, "w");
  ASSERT_TRUE(int8.ok()) << int8.status();
  EXPECT_FALSE(UsesInt4Bf16Kernel(x, *int8, at::Tensor()));
  // A dense weight, or a mismatched input width, is not a packed product at all.
  EXPECT_FALSE(UsesInt4Bf16Kernel(x, SeededRandn({40, 256}, 14).to(at::kBFloat16), at::Tensor()));
  EXPECT_FALSE(UsesInt4Bf16Kernel(SeededRandn({8, 128}, 15).to(at::kBFloat16), packed, at::Tensor()));
}

}  // namespace
}  // namespace placer::model
