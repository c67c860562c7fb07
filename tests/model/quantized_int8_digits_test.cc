// The 8-bit x three-digit kernel (each block of 128 inputs as the unsigned bytes of a 24-bit
// integer plus 2^23, multiplied with the signed codes by vpdpbusd) against float64 products of
// the exactly dequantized weight and the inputs, within the bound its header states: float32
// and BF16 rows, one group per output row and groups of 128 and 256, odd outputs, 1-16 rows,
// float32 / BF16 / no bias, blocks with offsets; every code value (-128 and 127 included) exactly;
// outliers and tiny blocks; the digits themselves; each row bit-identical alone and in any batch
// and wherever the weight starts in memory; non-finite inputs; QuantizedLinear sending BF16
// decode rows of 8-bit weights in groups of 128s there, and nothing else.
#include "model/quantized_int8_digits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "loader/quantized_weight.h"
#include "model/input_digits.h"
#include "model/packed_kernels_note.h"
#include "model/quantized_linear.h"
#include "tests/model/int4_digit_checks.h"
#include "tests/model/int8_codes.h"
#include "tests/model/packed_bf16_checks.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

using int4_digit_checks::ExpectWithinTheBound;
using int8_codes::Pack;

// A BF16 output's own rounding, relative.
const double kBf16Rounding = std::ldexp(1.0, -8);

class Int8DigitsKernel : public testing::Test {
 protected:
  void SetUp() override {
    if (!Int8DigitsKernelRuns()) GTEST_SKIP() << "this CPU lacks AVX512-VNNI";
  }
};

TEST_F(Int8DigitsKernel, ProductsMatchAFloat64Reference) {
  struct Shape {
    int64_t out, in, group;
  };
  const Shape shapes[] = {{1, 128, 128},    {3, 256, 128},   {65, 384, 384}, {7, 512, 256},
                          {130, 768, 768}, {17, 2048, 128}, {2, 2048, 2048}};
  int seed = 1;
  for (const Shape& shape : shapes) {
    for (bool with_offsets : {false, true}) {
      const at::Tensor packed = Pack(shape.out, shape.in, shape.group, ++seed, with_offsets);
      for (int64_t rows : {1, 2, 3, 4, 5, 9, 16}) {
        for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
          SCOPED_TRACE(testing::Message() << "out " << shape.out << " in " << shape.in << " group "
                                          << shape.group << " offsets " << with_offsets << " rows "
                                          << rows << " " << dtype);
          const at::Tensor x = SeededRandn({rows, shape.in}, ++seed).to(dtype);
          const at::Tensor bias = rows % 2 == 1 ? SeededRandn({shape.out}, ++seed).to(dtype) : at::Tensor();
          ASSERT_TRUE(UsesInt8DigitsKernel(x, packed, bias));
          const at::Tensor y = QuantizedLinearInt8Digits(x, packed, bias);
          ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, shape.out}));
          ASSERT_EQ(y.scalar_type(), dtype);
          ExpectWithinTheBound(y, x, packed, bias, dtype == at::kFloat ? 1e-6 : kBf16Rounding);
        }
      }
    }
  }
}

TEST_F(Int8DigitsKernel, EveryCodeValueIsMultipliedExactly) {
  // Each of the 256 codes at every position of a 128-input block (rows shift the pattern), and
  // one-hot inputs of 0.5: each block's step makes 0.5 the integer 127 · 2^16 exactly, so each
  // output is one weight times 0.5 up to float32 roundings; a wrong sign, digit or code sum shows.
  const int64_t out = 37, in = 256;
  for (bool with_offsets : {false, true}) {
    SCOPED_TRACE(testing::Message() << "offsets " << with_offsets);
    const at::Tensor packed =
        int8_codes::WithEveryCode(Pack(out, in, 128, 3, with_offsets), out, in, 128);
    const at::Tensor x = at::eye(in).mul(0.5);
    // Within ~1e-4 |s| of w[n][i] / 2; a wrong code is off by at least |s| / 2.
    ExpectWithinTheBound(QuantizedLinearInt8Digits(x, packed, at::Tensor()), x, packed, at::Tensor());
  }
}

TEST_F(Int8DigitsKernel, OutliersAndTinyBlocksStayWithinTheBound) {
  // An input 1000 times the others in some blocks (as LLM activations have), a block of values
  // around 1e-30, and an all-zero block: the steps follow each block's own largest.
  const at::Tensor packed = Pack(40, 512, 512, 5, true);
  at::Tensor x = SeededRandn({3, 512}, 6);
  x.index_put_({0, 7}, 1000.0f);
  x.index_put_({1, 300}, -2500.0f);
  x.narrow(1, 128, 128).mul_(1e-30);
  x.narrow(1, 384, 128).zero_();
  const at::Tensor y = QuantizedLinearInt8Digits(x, packed, at::Tensor());
  ExpectWithinTheBound(y, x, packed, at::Tensor());
  EXPECT_TRUE(at::all(at::isfinite(y)).item<bool>());
}

TEST_F(Int8DigitsKernel, TheDigitsAreTheBytesOfEachInputsIntegerPlusTwoToThe23) {
  const int64_t rows = 2, in = 384, group = 384;
  at::Tensor x = SeededRandn({rows, in}, 11);
  x.index_put_({1, 200}, 777.0f);
  std::vector<float> sums(rows);
  for (int64_t r = 0; r < rows; ++r) sums[static_cast<size_t>(r)] = x[r].sum().item<float>();
  QuantOperands op{};
  op.x = x.data_ptr<float>();
  op.x_group_sums = sums.data();
  op.rows = rows;
  op.in = in;
  op.group_size = group;
  op.groups = 1;
  Int8Digits digits;
  Int8DigitsOfRows(op, &digits);
  const int64_t blocks = in / kDigitBlock;
  ASSERT_EQ(digits.digits.size(), static_cast<size_t>(rows * in * 3));
  ASSERT_EQ(digits.steps.size(), static_cast<size_t>(rows * blocks));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const double largest = x[r].narrow(0, b * kDigitBlock, kDigitBlock).abs().max().item<double>();
      const double t = digits.steps[static_cast<size_t>(r * blocks + b)];
      EXPECT_NEAR(t, largest / kDigitRange, t * 1e-6);
      const uint8_t* block = digits.digits.data() + (r * blocks + b) * 3 * kDigitBlock;
      for (int64_t span = 0; span < 2; ++span) {
        const uint8_t* d = block + span * 3 * 64;
        for (int64_t lane = 0; lane < 64; ++lane) {
          const int64_t input = b * kDigitBlock + span * 64 + lane;
          const double v = 65536.0 * d[lane] + 256.0 * d[64 + lane] + d[128 + lane] - 8388608.0;
          EXPECT_LE(std::fabs(v), kDigitRange + 1);
          EXPECT_LE(std::fabs(v * t - x[r][input].item<double>()), 2 * t)
              << "row " << r << " input " << input;
        }
      }
    }
  }
}

TEST_F(Int8DigitsKernel, ARowIsTheSameAloneAndInAnyBatch) {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (int64_t group : {128, 384}) {
      SCOPED_TRACE(testing::Message() << dtype << " group " << group);
      const at::Tensor packed = Pack(67, 384, group, 21, true);
      packed_bf16_checks::ExpectRowsAloneAndInAnyBatch(
          QuantizedLinearInt8Digits, SeededRandn({16, 384}, 22).to(dtype), packed,
          SeededRandn({67}, 23).to(dtype));
    }
  }
}

TEST_F(Int8DigitsKernel, ProductsAreTheSameWhereverTheWeightStartsInMemory) {
  // The codes are read as aligned cache lines put together (aligned_code_lines.h): a weight
  // starting at each 4-byte offset within a line gives the same bits as one starting on a line.
  for (int64_t group : {128, 384}) {
    const at::Tensor packed = Pack(45, 384, group, 17, true);
    const at::Tensor x = SeededRandn({3, 384}, 18);
    const at::Tensor lines = at::empty({packed.numel() + 128}, packed.options());
    const int64_t line_start = (-reinterpret_cast<intptr_t>(lines.data_ptr())) & 63;
    at::Tensor expected;
    for (int64_t offset = 0; offset < 64; offset += 4) {
      SCOPED_TRACE(testing::Message() << "group " << group << " offset " << offset);
      const at::Tensor moved = lines.narrow(0, line_start + offset, packed.numel()).view(packed.sizes());
      moved.copy_(packed);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(moved.data_ptr()) % 64, static_cast<uintptr_t>(offset));
      const at::Tensor y = QuantizedLinearInt8Digits(x, moved, at::Tensor());
      if (offset == 0) {
        expected = y;
        ExpectWithinTheBound(y, x, packed, at::Tensor());
      } else {
        EXPECT_TRUE(at::equal(y, expected));
      }
    }
  }
}

TEST_F(Int8DigitsKernel, ANonFiniteInputMakesItsRowNan) {
  const at::Tensor packed = Pack(20, 256, 256, 31, false);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    at::Tensor x = SeededRandn({3, 256}, 32);
    x.index_put_({1, 140}, bad);
    const at::Tensor y = QuantizedLinearInt8Digits(x, packed, at::Tensor());
    EXPECT_TRUE(at::all(at::isnan(y[1])).item<bool>()) << bad;
    EXPECT_TRUE(at::all(at::isfinite(y[0])).item<bool>() && at::all(at::isfinite(y[2])).item<bool>());
  }
}

TEST_F(Int8DigitsKernel, QuantizedLinearSendsBf16RowsOfGroupsOf128sHere) {
  const at::Tensor packed = Pack(48, 256, 256, 41, false);
  const at::Tensor x = SeededRandn({8, 256}, 42).to(at::kBFloat16);
  ASSERT_LE(8, QuantizedLinearMaxRows(DetectQuantIsa(), *loader::PackedLayoutOf(packed), at::kBFloat16));
  EXPECT_TRUE(at::equal(QuantizedLinear(x, packed, at::Tensor()),
                        QuantizedLinearInt8Digits(x, packed, at::Tensor())));
  // Float32 rows keep the float kernel (the digits cost more than its fma per weight from two
  // rows on: quantized_linear.cc).
  const at::Tensor f32 = x.to(at::kFloat);
  EXPECT_TRUE(at::equal(QuantizedLinear(f32, packed, at::Tensor()),
                        QuantizedLinearKernel(f32, packed, at::Tensor(), DetectQuantIsa())));
  // Groups of 64, 4-bit weights, dense weights and mismatched widths are not its operands.
  EXPECT_FALSE(UsesInt8DigitsKernel(x, Pack(48, 256, 64, 43, false), at::Tensor()));
  absl::StatusOr<at::Tensor> int4 =
      loader::QuantizeLinearWeight(SeededRandn({48, 256}, 44), loader::PackedLayout{4, 48, 256, 128}, "w");
  ASSERT_TRUE(int4.ok()) << int4.status();
  EXPECT_FALSE(UsesInt8DigitsKernel(x, *int4, at::Tensor()));
  EXPECT_FALSE(UsesInt8DigitsKernel(x, SeededRandn({48, 256}, 45).to(at::kBFloat16), at::Tensor()));
  EXPECT_FALSE(UsesInt8DigitsKernel(SeededRandn({8, 128}, 46), packed, at::Tensor()));
}

TEST_F(Int8DigitsKernel, TheStartLogNoteNamesItForBf16Rows) {
  const std::string bf16 = PackedKernelsNote(loader::DType::kBF16);
  EXPECT_EQ(bf16.rfind("packed kernels (BF16 rows): AVX512-VNNI for 8-bit weights in groups of "
                       "128s (each block of 128 inputs as 24-bit integers",
                       0),
            0u)
      << bf16;
  EXPECT_EQ(PackedKernelsNote(loader::DType::kF32).find("VNNI for 8-bit"), std::string::npos);
}

}  // namespace
}  // namespace placer::model
