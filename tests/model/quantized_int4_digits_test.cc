// The 4-bit x three-digit kernel (each block of 128 float32 inputs as 24-bit integers in three
// signed bytes, multiplied with the codes by vpdpbusd or vpmaddubsw), in every form this CPU
// runs (AVX512-VNNI, AVX2), against float64 products of the exactly dequantized weight and the
// float32 inputs, within the bound its header states: groups of 128, 256 and one per output
// row, odd outputs, 1-16 rows (passes of 1-4 and their tails), float32 or no bias, asymmetric
// offsets, inputs with outliers, BF16 rows; the digits themselves (the same bits from the AVX2
// code as from DigitsOfRows); each row bit-identical alone and in any batch; non-finite
// inputs; QuantizedLinear sending decode rows of 4-bit weights in groups of 128s there (float32
// ones, and BF16 ones on AVX2 alone), and nothing else.
#include "model/quantized_int4_digits.h"
#include "model/quantized_int4_digits_avx2.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "loader/quantized_weight.h"
#include "model/packed_kernels_note.h"
#include "model/quantized_linear.h"
#include "tests/model/int4_digit_checks.h"
#include "tests/model/packed_bf16_checks.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

using loader::PackedLayout;
using int4_digit_checks::ExpectWithinTheBound;
using int4_digit_checks::Pack;
using int4_digit_checks::kDigitRange;

class Int4DigitsKernel : public testing::Test {
 protected:
  void SetUp() override {
    if (!Int4DigitsKernelRuns()) GTEST_SKIP() << "this CPU lacks AVX2";
  }
};

std::string NameOf(Int4DigitsIsa isa) { return Int4DigitsIsaName(isa); }

TEST_F(Int4DigitsKernel, ProductsMatchAFloat64Reference) {
  struct Shape {
    int64_t out, in, group;
  };
  const Shape shapes[] = {{1, 128, 128},   {3, 256, 128},   {65, 384, 384}, {7, 512, 256},
                          {130, 768, 128}, {17, 2048, 128}, {33, 256, 256}};
  int seed = 1;
  for (const Shape& shape : shapes) {
    const at::Tensor packed = Pack(shape.out, shape.in, shape.group, ++seed);
    for (int64_t rows : {1, 2, 3, 4, 5, 9, 16}) {
      for (bool with_bias : {false, true}) {
        const at::Tensor x = SeededRandn({rows, shape.in}, ++seed);
        const at::Tensor bias = with_bias ? SeededRandn({shape.out}, ++seed) : at::Tensor();
        ASSERT_TRUE(UsesInt4DigitsKernel(x, packed, bias));
        for (Int4DigitsIsa isa : RunnableInt4DigitsIsas()) {
          SCOPED_TRACE(testing::Message() << NameOf(isa) << " out " << shape.out << " in "
                                          << shape.in << " group " << shape.group << " rows "
                                          << rows << " bias " << with_bias);
          const at::Tensor y = QuantizedLinearInt4Digits(x, packed, bias, isa);
          ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, shape.out}));
          ASSERT_EQ(y.scalar_type(), at::kFloat);
          ExpectWithinTheBound(y, x, packed, bias);
        }
      }
    }
  }
}

TEST_F(Int4DigitsKernel, OutliersAndTinyBlocksStayWithinTheBound) {
  // An input 1000 times the others in some blocks (as LLM activations have), a block of
  // values around 1e-30, and an all-zero block: the steps follow each block's own largest.
  const at::Tensor packed = Pack(40, 512, 128, 5);
  at::Tensor x = SeededRandn({3, 512}, 6);
  x.index_put_({0, 7}, 1000.0f);
  x.index_put_({1, 300}, -2500.0f);
  x.narrow(1, 128, 128).mul_(1e-30);
  x.narrow(1, 384, 128).zero_();
  for (Int4DigitsIsa isa : RunnableInt4DigitsIsas()) {
    SCOPED_TRACE(NameOf(isa));
    const at::Tensor y = QuantizedLinearInt4Digits(x, packed, at::Tensor(), isa);
    ExpectWithinTheBound(y, x, packed, at::Tensor());
    EXPECT_TRUE(at::all(at::isfinite(y)).item<bool>());
  }
}

TEST_F(Int4DigitsKernel, BF16RowsAreTheirFloat32WideningsRoundedOnce) {
  // What AVX2 serves BF16 decode rows with: the rows widened (exact), the float32 products
  // rounded to BF16 once.
  const at::Tensor packed = Pack(37, 384, 128, 9);
  const at::Tensor x = SeededRandn({5, 384}, 10).to(at::kBFloat16);
  const at::Tensor bias = SeededRandn({37}, 11);
  for (Int4DigitsIsa isa : RunnableInt4DigitsIsas()) {
    SCOPED_TRACE(NameOf(isa));
    const at::Tensor y = QuantizedLinearInt4Digits(x, packed, bias, isa);
    ASSERT_EQ(y.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(at::equal(
        y, QuantizedLinearInt4Digits(x.to(at::kFloat), packed, bias, isa).to(at::kBFloat16)));
    ExpectWithinTheBound(y, x, packed, bias, std::ldexp(1.0, -8));
  }
}

TEST_F(Int4DigitsKernel, BlocksTooSmallForTheStepsInverseStayNearZero) {
  // max|x| ~1e-35: (127 · 2^16) / max|x| overflows float32 and the step is subnormal. Such
  // rows come out within float32's absolute error near zero, never as garbage digits.
  const at::Tensor packed = Pack(24, 256, 128, 7);
  at::Tensor x = SeededRandn({2, 256}, 8);
  x[0].mul_(1e-35);                    // a whole row of tiny values
  x[1].narrow(0, 0, 128).mul_(4e-38);  // one tiny block next to an ordinary one
  const at::Tensor w64 = loader::DequantizeLinearWeight(packed, at::kFloat).to(at::kDouble);
  const at::Tensor reference = at::matmul(x.to(at::kDouble), w64.t());
  for (Int4DigitsIsa isa : RunnableInt4DigitsIsas()) {
    SCOPED_TRACE(NameOf(isa));
    const at::Tensor y = QuantizedLinearInt4Digits(x, packed, at::Tensor(), isa);
    EXPECT_LE((y[0].to(at::kDouble) - reference[0]).abs().max().item<double>(), 1e-36);
    ExpectWithinTheBound(y.narrow(0, 1, 1), x.narrow(0, 1, 1), packed, at::Tensor());
  }
}

TEST_F(Int4DigitsKernel, TheDigitsRepresentEachInputWithinTwoSteps) {
  const int64_t rows = 2, in = 384, group = 128;
  at::Tensor x = SeededRandn({rows, in}, 11);
  x.index_put_({1, 200}, 777.0f);
  std::vector<float> sums(static_cast<size_t>(rows * in / group));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < in / group; ++g) {
      sums[static_cast<size_t>(r * (in / group) + g)] =
          x[r].narrow(0, g * group, group).sum().item<float>();
    }
  }
  QuantOperands op{};
  op.x = x.data_ptr<float>();
  op.x_group_sums = sums.data();
  op.rows = rows;
  op.in = in;
  op.group_size = group;
  op.groups = in / group;
  Int4Digits digits;
  DigitsOfRows(op, &digits);
  const int64_t blocks = in / kDigitBlock;
  if (Int4DigitsAvx2Runs()) {
    // The AVX2 code's digits and steps are DigitsOfRows' bits (where that is the AVX-512 code).
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < blocks; ++b) {
        std::vector<int8_t> block(3 * kDigitBlock);
        float step = 0;
        DigitsOfBlockAvx2(x.data_ptr<float>() + r * in + b * kDigitBlock,
                          sums[static_cast<size_t>(r * blocks + b)], block.data(), &step);
        EXPECT_EQ(step, digits.steps[static_cast<size_t>(r * blocks + b)]);
        EXPECT_EQ(0, std::memcmp(block.data(),
                                 digits.digits.data() + (r * blocks + b) * 3 * kDigitBlock,
                                 block.size()))
            << "row " << r << " block " << b;
      }
    }
  }
  ASSERT_EQ(digits.digits.size(), static_cast<size_t>(rows * in * 3));
  ASSERT_EQ(digits.steps.size(), static_cast<size_t>(rows * blocks));
  // Within a 64-input span, unpack lanes 16k..16k+15 hold inputs from kFirst[k].
  constexpr int64_t kFirst[4] = {0, 32, 16, 48};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const double largest = x[r].narrow(0, b * kDigitBlock, kDigitBlock).abs().max().item<double>();
      const double t = digits.steps[static_cast<size_t>(r * blocks + b)];
      EXPECT_NEAR(t, largest / kDigitRange, t * 1e-6);
      const int8_t* block = digits.digits.data() + (r * blocks + b) * 3 * kDigitBlock;
      for (int64_t span = 0; span < 2; ++span) {
        const int8_t* d = block + span * 3 * 64;
        for (int64_t lane = 0; lane < 64; ++lane) {
          const int64_t input = b * kDigitBlock + span * 64 + kFirst[lane / 16] + lane % 16;
          const double v = 65536.0 * d[lane] + 256.0 * d[64 + lane] + d[128 + lane];
          EXPECT_LE(std::fabs(v), kDigitRange + 1);
          EXPECT_LE(std::fabs(v * t - x[r][input].item<double>()), 2 * t)
              << "row " << r << " input " << input;
        }
      }
    }
  }
}

TEST_F(Int4DigitsKernel, ARowIsTheSameAloneAndInAnyBatch) {
  const at::Tensor packed = Pack(67, 256, 128, 21);
  for (Int4DigitsIsa isa : RunnableInt4DigitsIsas()) {
    SCOPED_TRACE(NameOf(isa));
    packed_bf16_checks::ExpectRowsAloneAndInAnyBatch(
        [isa](const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
          return QuantizedLinearInt4Digits(x, w, bias, isa);
        },
        SeededRandn({16, 256}, 22), packed, SeededRandn({67}, 23));
  }
}

TEST_F(Int4DigitsKernel, ANonFiniteInputMakesItsRowNan) {
  const at::Tensor packed = Pack(20, 256, 128, 31);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    at::Tensor x = SeededRandn({3, 256}, 32);
    x.index_put_({1, 140}, bad);
    for (Int4DigitsIsa isa : RunnableInt4DigitsIsas()) {
      const at::Tensor y = QuantizedLinearInt4Digits(x, packed, at::Tensor(), isa);
      EXPECT_TRUE(at::all(at::isnan(y[1])).item<bool>()) << bad << " " << NameOf(isa);
      EXPECT_TRUE(at::all(at::isfinite(y[0])).item<bool>() &&
                  at::all(at::isfinite(y[2])).item<bool>());
    }
  }
}

TEST_F(Int4DigitsKernel, QuantizedLinearSendsDecodeRowsOfGroupsOf128sHere) {
  const at::Tensor packed = Pack(48, 256, 128, 41);
  const at::Tensor x = SeededRandn({2, 256}, 42);
  if (DetectQuantIsa() == QuantIsa::kAvx512 && !DigitsVnniRuns()) {
    // AVX-512 without VNNI keeps its float kernel (quantized_int4_quads.h).
    EXPECT_FALSE(UsesInt4DigitsKernel(x, packed, at::Tensor()));
    return;
  }
  EXPECT_TRUE(at::equal(QuantizedLinear(x, packed, at::Tensor()),
                        QuantizedLinearInt4Digits(x, packed, at::Tensor())));
  // BF16 rows on AVX2 alone (with AVX512-VNNI they keep the vdpbf16ps or float kernels).
  const at::Tensor bf16 = x.to(at::kBFloat16);
  EXPECT_EQ(UsesInt4DigitsKernel(bf16, packed, at::Tensor()), !DigitsVnniRuns());
  if (!DigitsVnniRuns()) {
    EXPECT_TRUE(at::equal(QuantizedLinear(bf16, packed, at::Tensor()),
                          QuantizedLinearInt4Digits(bf16, packed, at::Tensor())));
  }
  // Not groups of 32 or 64, or 8-bit weights.
  EXPECT_FALSE(UsesInt4DigitsKernel(x, Pack(48, 256, 32, 43), at::Tensor()));
  EXPECT_FALSE(UsesInt4DigitsKernel(x, Pack(48, 256, 64, 44), at::Tensor()));
  absl::StatusOr<at::Tensor> int8 = loader::QuantizeLinearWeight(
      SeededRandn({48, 256}, 45), PackedLayout{8, 48, 256, 128}, "w");
  ASSERT_TRUE(int8.ok());
  EXPECT_FALSE(UsesInt4DigitsKernel(x, *int8, at::Tensor()));
  EXPECT_FALSE(UsesInt4DigitsKernel(x, SeededRandn({48, 256}, 46), at::Tensor()));
}

TEST_F(Int4DigitsKernel, TheStartLogNoteNamesIt) {
  const std::string f32 = PackedKernelsNote(loader::DType::kF32);
  const std::string bf16 = PackedKernelsNote(loader::DType::kBF16);
  EXPECT_EQ(f32.rfind("packed kernels (F32 rows): ", 0), 0u) << f32;
  EXPECT_EQ(PackedKernelsNote(loader::DType::kF16), "");
  if (DigitsVnniRuns()) {
    EXPECT_NE(f32.find("AVX512-VNNI for 4-bit weights in groups of 128s"), std::string::npos) << f32;
    // BF16 rows of 4-bit weights take the vdpbf16ps kernel (8-bit ones the VNNI digits).
    EXPECT_EQ(bf16.find("VNNI for 4-bit"), std::string::npos) << bf16;
  } else if (DetectQuantIsa() == QuantIsa::kAvx2) {
    for (const std::string& note : {f32, bf16}) {
      EXPECT_NE(note.find("AVX2 vpmaddubsw for 4-bit weights in groups of 128s, decode steps"),
                std::string::npos)
          << note;
    }
    EXPECT_EQ(bf16.rfind("packed kernels (BF16 rows): ", 0), 0u) << bf16;
  }
}

}  // namespace
}  // namespace placer::model
