// The 8-bit x BF16 kernel (vdpbf16ps over each code's two nibbles turned into BF16 numbers in
// registers) against float64 products of the exactly dequantized weight and the BF16 inputs:
// one group per output row and groups of 64, 128 and 192, every code value (-128 and 127
// included), odd outputs, 1-16 rows, BF16 / float32 / no bias, blocks with offsets (as GPTQ's
// zero points store them); each row bit-identical alone and in any batch; QuantizedLinear sending
// BF16 decode rows of 8-bit weights there (those in groups of 128s only where the digits kernel
// does not run), and nothing else.
#include "model/quantized_int8_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "loader/quantized_weight.h"
#include "model/packed_bf16_kernels.h"
#include "model/quantized_linear.h"
#include "tests/model/int8_codes.h"
#include "tests/model/packed_bf16_checks.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

using loader::PackedLayout;

using int8_codes::Pack;
using int8_codes::WithEveryCode;

// Per output and input, what the kernel's float32 sums carry for that weight: the code as 400 + q
// times |s| (up to 527 |s|), and the block's offset term |m - 400 s|.
at::Tensor KernelTerms(const at::Tensor& packed) {
  const PackedLayout layout = *loader::PackedLayoutOf(packed);
  at::Tensor terms = at::empty({layout.out, layout.groups()}, at::kDouble);
  const auto* bytes = static_cast<const uint8_t*>(packed.data_ptr());
  for (int64_t b = 0; b < layout.out * layout.groups(); ++b) {
    const uint8_t* block = bytes + b * layout.block_bytes();
    terms.view({-1})[b] = 927.0 * std::fabs(BlockScale(block)) + std::fabs(BlockOffset(block));
  }
  return terms.repeat_interleave(layout.group_size, 1);
}

void ExpectMatchesFloat64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& packed,
                          const at::Tensor& bias) {
  packed_bf16_checks::ExpectMatchesFloat64(y, x, packed, bias, KernelTerms(packed));
}

class Int8Bf16 : public testing::Test {
 protected:
  void SetUp() override {
    if (!Int8Bf16KernelRuns()) GTEST_SKIP() << "this CPU lacks AVX-512 BF16";
  }
};

TEST_F(Int8Bf16, ProductsMatchAFloat64Reference) {
  struct Shape {
    int64_t out, in, group;
  };
  const Shape shapes[] = {{1, 64, 64},    {3, 128, 64},   {65, 192, 192}, {7, 256, 128},
                          {130, 768, 768}, {17, 384, 128}, {2, 2048, 2048}, {33, 320, 64}};
  int seed = 1;
  for (const Shape& shape : shapes) {
    for (bool with_offsets : {false, true}) {
      const at::Tensor packed = Pack(shape.out, shape.in, shape.group, ++seed, with_offsets);
      for (int64_t rows : {1, 2, 5, 8, 9, 16}) {
        for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {
          SCOPED_TRACE(testing::Message() << "out " << shape.out << " in " << shape.in << " group "
                                          << shape.group << " offsets " << with_offsets << " rows "
                                          << rows << " bias " << bias_kind);
          const at::Tensor x = SeededRandn({rows, shape.in}, ++seed).to(at::kBFloat16);
          at::Tensor bias;
          if (bias_kind > 0) bias = SeededRandn({shape.out}, ++seed);
          if (bias_kind == 2) bias = bias.to(at::kBFloat16);
          ASSERT_TRUE(UsesInt8Bf16Kernel(x, packed, bias));
          const at::Tensor y = QuantizedLinearInt8Bf16(x, packed, bias);
          ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, shape.out}));
          ASSERT_EQ(y.scalar_type(), at::kBFloat16);
          ExpectMatchesFloat64(y, x, packed, bias);
        }
      }
    }
  }
}

TEST_F(Int8Bf16, EveryCodeValueIsTakenApartExactly) {
  // Each of the 256 codes at every position of a 64-input chunk (rows shift the pattern), and
  // one-hot inputs: each output is then one weight times one input, which the float64 reference
  // gives exactly; a wrong nibble or sign anywhere shows.
  const int64_t out = 37, in = 256;
  for (bool with_offsets : {false, true}) {
    SCOPED_TRACE(testing::Message() << "offsets " << with_offsets);
    const at::Tensor packed = WithEveryCode(Pack(out, in, 128, 3, with_offsets), out, in, 128);
    // Row i of x picks input i: y[i][n] is w[n][i] / 2, within ~1e-6 of 927 |s| + |m| (a wrong
    // nibble is off by at least |s| / 2).
    const at::Tensor x = at::eye(in).mul(0.5).to(at::kBFloat16);
    ExpectMatchesFloat64(QuantizedLinearInt8Bf16(x, packed, at::Tensor()), x, packed, at::Tensor());
  }
}

TEST_F(Int8Bf16, LargeAndTinyInputsStayWithinTheTolerance) {
  // Inputs over many binades (BF16 keeps float32's exponent range) and exact zeros.
  const at::Tensor packed = Pack(33, 256, 256, 5, true);
  at::Tensor x = SeededRandn({4, 256}, 6) * at::pow(2.0, SeededRandn({4, 256}, 7).mul(8).round());
  x.index_put_({at::indexing::Slice(), at::indexing::Slice(0, 256, 7)}, 0);
  x = x.to(at::kBFloat16);
  ExpectMatchesFloat64(QuantizedLinearInt8Bf16(x, packed, at::Tensor()), x, packed, at::Tensor());
}

TEST_F(Int8Bf16, ARowIsTheSameAloneAndInAnyBatch) {
  for (int64_t group : {64, 384}) {
    SCOPED_TRACE(testing::Message() << "group " << group);
    const at::Tensor packed = Pack(301, 384, group, 8, true);
    const at::Tensor x = SeededRandn({16, 384}, 9).to(at::kBFloat16);
    const at::Tensor bias = SeededRandn({301}, 10).to(at::kBFloat16);
    packed_bf16_checks::ExpectRowsAloneAndInAnyBatch(QuantizedLinearInt8Bf16, x, packed, bias);
  }
}

TEST_F(Int8Bf16, ProductsAreTheSameWhereverTheWeightStartsInMemory) {
  // The codes are read as aligned cache lines put together (aligned_code_lines.h): a weight
  // starting at each 4-byte offset within a line gives the same bits as one starting on a line,
  // for single-group rows, groups of 64 (a vector per group) and groups of 192.
  for (int64_t group : {64, 192, 384}) {
    const at::Tensor packed = Pack(45, 384, group, 17, true);
    const at::Tensor x = SeededRandn({3, 384}, 18).to(at::kBFloat16);
    const at::Tensor bias = SeededRandn({45}, 19);
    const at::Tensor lines = at::empty({packed.numel() + 128}, packed.options());
    const int64_t line_start = (-reinterpret_cast<intptr_t>(lines.data_ptr())) & 63;
    at::Tensor expected;
    for (int64_t offset = 0; offset < 64; offset += 4) {
      SCOPED_TRACE(testing::Message() << "group " << group << " offset " << offset);
      const at::Tensor moved = lines.narrow(0, line_start + offset, packed.numel()).view(packed.sizes());
      moved.copy_(packed);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(moved.data_ptr()) % 64, static_cast<uintptr_t>(offset));
      const at::Tensor y = QuantizedLinearInt8Bf16(x, moved, bias);
      if (offset == 0) {
        expected = y;
        ExpectMatchesFloat64(y, x, packed, bias);
      } else {
        EXPECT_TRUE(at::equal(y, expected));
      }
    }
  }
}

TEST_F(Int8Bf16, QuantizedLinearTakesItForBf16DecodeRowsOfEightBitWeightsOnly) {
  // Groups of 64: groups of 128s take the digits kernel where AVX512-VNNI runs
  // (quantized_int8_digits_test.cc), this one elsewhere.
  const at::Tensor packed = Pack(40, 256, 64, 11, false);
  const at::Tensor x = SeededRandn({8, 256}, 12).to(at::kBFloat16);
  ASSERT_LE(8, QuantizedLinearMaxRows(DetectQuantIsa(), *loader::PackedLayoutOf(packed), at::kBFloat16));
  EXPECT_TRUE(at::equal(QuantizedLinear(x, packed, at::Tensor()),
                        QuantizedLinearInt8Bf16(x, packed, at::Tensor())));
  // float32 rows keep the float kernels (their float32 arithmetic), 4-bit weights their own.
  EXPECT_FALSE(UsesInt8Bf16Kernel(x.to(at::kFloat), packed, at::Tensor()));
  absl::StatusOr<at::Tensor> int4 =
      loader::QuantizeLinearWeight(SeededRandn({40, 256}, 13), PackedLayout{4, 40, 256, 128}, "w");
  ASSERT_TRUE(int4.ok()) << int4.status();
  EXPECT_FALSE(UsesInt8Bf16Kernel(x, *int4, at::Tensor()));
  // Groups that are not multiples of 64 inputs stay with the float kernels.
  absl::StatusOr<at::Tensor> groups_of_32 =
      loader::QuantizeLinearWeight(SeededRandn({40, 256}, 14), PackedLayout{8, 40, 256, 32}, "w");
  ASSERT_TRUE(groups_of_32.ok()) << groups_of_32.status();
  EXPECT_FALSE(UsesInt8Bf16Kernel(x, *groups_of_32, at::Tensor()));
  // A dense weight, or a mismatched input width, is not a packed product at all.
  EXPECT_FALSE(UsesInt8Bf16Kernel(x, SeededRandn({40, 256}, 15).to(at::kBFloat16), at::Tensor()));
  EXPECT_FALSE(UsesInt8Bf16Kernel(SeededRandn({8, 128}, 16).to(at::kBFloat16), packed, at::Tensor()));
}

}  // namespace
}  // namespace placer::model
