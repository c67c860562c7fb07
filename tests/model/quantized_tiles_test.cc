// The AMX prompt-chunk kernel for 4-bit and 8-bit weights (codes and the three BF16 parts of
// each input, multiplied by tdpbf16ps) against float64 products of the exactly dequantized
// weight, within the float kernels' tolerance plus the sequential sums its header states:
// groups of 32, 64, 128, 160, 256 and one per output row, 1-16 outputs past a pass of 32 and odd
// tails, 1-100 rows (one row tile, a padded pair, several pairs), bias or none, 8-bit offsets
// (zero points); every 8-bit code exact; each row bit-identical alone, in any chunk and at either
// thread count; outliers, tiny and zero blocks, inputs that need all three parts; non-finite
// inputs spoiling only their row; what QuantizedLinear sends here, and what it does not.
#include "model/quantized_tiles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "loader/quantized_weight.h"
#include "model/digit_tiles.h"
#include "model/packed_kernels_note.h"
#include "model/quantized_int4_digits.h"
#include "model/quantized_linear.h"
#include "tests/model/chunk_invariance_checks.h"
#include "tests/model/int4_digit_checks.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

using int4_digit_checks::Pack;  // rows shifted by a random mean: offsets other than -8 s

// Each block's offset m, repeated over its inputs: [out, in].
at::Tensor Offsets(const at::Tensor& packed) {
  const loader::PackedLayout layout = *loader::PackedLayoutOf(packed);
  at::Tensor offsets = at::empty({layout.out, layout.groups()}, at::kDouble);
  const auto* bytes = static_cast<const uint8_t*>(packed.data_ptr());
  for (int64_t b = 0; b < layout.out * layout.groups(); ++b) {
    float m;
    std::memcpy(&m, bytes + b * layout.block_bytes() + 4, sizeof(m));
    offsets.view({-1})[b] = static_cast<double>(m);
  }
  return offsets.repeat_interleave(layout.group_size, 1);
}

// 8-bit weights (groups of `group`, or one per row for group == in) whose blocks' offsets are
// random zero points m = -z·s, z in [-9, 9] (GPTQ's asymmetric 8-bit), not the symmetric 0.
at::Tensor Pack8(int64_t out, int64_t in, int64_t group, int seed) {
  absl::StatusOr<at::Tensor> packed = loader::QuantizeLinearWeight(
      SeededRandn({out, in}, seed), loader::PackedLayout{8, out, in, group}, "w");
  EXPECT_TRUE(packed.ok()) << packed.status();
  const loader::PackedLayout layout = *loader::PackedLayoutOf(*packed);
  auto* bytes = static_cast<uint8_t*>(packed->data_ptr());
  for (int64_t b = 0; b < layout.out * layout.groups(); ++b) {
    uint8_t* block = bytes + b * layout.block_bytes();
    float scale;
    std::memcpy(&scale, block, sizeof(scale));
    const float offset = -static_cast<float>((b * 7 + seed) % 19 - 9) * scale;
    std::memcpy(block + 4, &offset, sizeof(offset));
  }
  return *packed;
}

// Inputs whose tile sums the kernel adds into an output's running sum at once (its header).
int64_t Span(const loader::PackedLayout& layout) {
  return layout.group_size % 128 == 0 ? 128 : layout.group_size;
}

// The float kernels' tolerance (quantized_linear_test.cc: a few float32 roundings of the result
// and of the sum of |x|·|w|), which random inputs meet; with `header_bound`, plus the sums the
// header states: a span's 3·span products s·q·(part of x) added one at a time into one float32,
// a rounding of the running sum per span, and the group's input sum times m (an outlier makes
// every later addition round coarsely).
void ExpectNearFloat64(const at::Tensor& y, const at::Tensor& x, const at::Tensor& packed,
                       const at::Tensor& bias, bool header_bound = false) {
  const loader::PackedLayout layout = *loader::PackedLayoutOf(packed);
  const at::Tensor w64 = loader::DequantizeLinearWeight(packed, at::kFloat).to(at::kDouble);
  const at::Tensor x64 = x.to(at::kDouble);
  at::Tensor reference = at::matmul(x64, w64.t());
  if (bias.defined()) reference = reference + bias.to(at::kDouble);
  const at::Tensor magnitude = at::matmul(x64.abs(), w64.abs().t());
  const at::Tensor offsets = Offsets(packed);
  const double unit = std::ldexp(1.0, -24), group = static_cast<double>(layout.group_size);
  const double span = static_cast<double>(Span(layout)), spans = layout.in / span;
  const at::Tensor sequential =
      at::matmul(x64.abs(), (w64 - offsets).abs().t()) * ((3 * span + spans) * unit) +
      at::matmul(x64.abs(), offsets.abs().t()) * (group * unit);
  const at::Tensor error = (y.to(at::kDouble) - reference).abs();
  const at::Tensor allowed =
      reference.abs() * 1e-6 + magnitude * 2e-6 + (header_bound ? sequential : at::zeros_like(sequential));
  ASSERT_TRUE(at::all(error <= allowed).item<bool>())
      << "worst error " << (error - allowed).max().item<double>() << " beyond the tolerance";
}

class QuantizedTiles : public testing::Test {
 protected:
  void SetUp() override {
    if (!QuantizedTilesKernelRuns()) {
      GTEST_SKIP() << "this CPU has no AMX tiles (or PLACER_QUANTIZED_TILES=0)";
    }
  }
};

TEST_F(QuantizedTiles, ProductsMatchAFloat64Reference) {
  struct Shape {
    int64_t out, in, group;
  };
  // 32 outputs (one pass), 3 (one padded pass), 67 and 130 (passes and a tail, two tasks),
  // groups of one k-block, two, four, eight and whole rows.
  const Shape shapes[] = {{32, 128, 32},  {3, 256, 64},   {67, 384, 384},
                          {130, 768, 128}, {17, 2048, 256}, {40, 96, 32}};
  int seed = 300;
  for (const Shape& shape : shapes) {
    const at::Tensor packed = Pack(shape.out, shape.in, shape.group, ++seed);
    // Row tiles: 1 (padded to a pair), 2, 3 (a pair and a padded one), 4, 5, 7.
    for (int64_t rows : {1, 16, 17, 33, 48, 64, 65, 100}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(testing::Message() << "out " << shape.out << " in " << shape.in << " group "
                                        << shape.group << " rows " << rows << " bias " << with_bias);
        const at::Tensor x = SeededRandn({rows, shape.in}, ++seed);
        const at::Tensor bias = with_bias ? SeededRandn({shape.out}, ++seed) : at::Tensor();
        const at::Tensor y = QuantizedLinearTiles(x, packed, bias);
        ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, shape.out}));
        ASSERT_EQ(y.scalar_type(), at::kFloat);
        ExpectNearFloat64(y, x, packed, bias);
      }
    }
  }
}

TEST_F(QuantizedTiles, EightBitProductsMatchAFloat64Reference) {
  struct Shape {
    int64_t out, in, group;
  };
  // One scale per output row (--quantize int8: thousands of inputs, spans of 128), groups of
  // 128s, of 160 (a span of five k-blocks), 64 and 32; passes, tails and a padded pass.
  const Shape shapes[] = {{67, 384, 384},   {130, 768, 128}, {17, 2048, 2048},
                          {32, 256, 64},    {40, 96, 32},    {20, 320, 160}};
  int seed = 700;
  for (const Shape& shape : shapes) {
    const at::Tensor packed = Pack8(shape.out, shape.in, shape.group, ++seed);
    for (int64_t rows : {1, 17, 33, 64, 100}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(testing::Message() << "out " << shape.out << " in " << shape.in << " group "
                                        << shape.group << " rows " << rows << " bias " << with_bias);
        const at::Tensor x = SeededRandn({rows, shape.in}, ++seed);
        const at::Tensor bias = with_bias ? SeededRandn({shape.out}, ++seed) : at::Tensor();
        const at::Tensor y = QuantizedLinearTiles(x, packed, bias);
        ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, shape.out}));
        ExpectNearFloat64(y, x, packed, bias);
      }
    }
  }
}

TEST_F(QuantizedTiles, EveryEightBitCodeIsExact) {
  // Scale 1, offset 0, and the identity as inputs: output n of row k is code (n, k) itself, so a
  // code widened with the wrong sign, in the wrong order or rounded shows. Codes cycle through
  // all 256 values; groups of 32 and one per row; F32 and BF16 rows.
  const int64_t out = 64, in = 256;
  for (int64_t group : {int64_t{32}, in}) {
    absl::StatusOr<at::Tensor> packed = loader::QuantizeLinearWeight(
        at::zeros({out, in}), loader::PackedLayout{8, out, in, group}, "w");
    ASSERT_TRUE(packed.ok()) << packed.status();
    const loader::PackedLayout layout = *loader::PackedLayoutOf(*packed);
    auto* bytes = static_cast<uint8_t*>(packed->data_ptr());
    at::Tensor codes = at::empty({out, in});
    for (int64_t n = 0; n < out; ++n) {
      for (int64_t k = 0; k < in; ++k) {
        const int64_t g = k / group;
        uint8_t* block = bytes + (n * layout.groups() + g) * layout.block_bytes();
        const float scale = 1.0f, offset = 0.0f;
        std::memcpy(block, &scale, sizeof(scale));
        std::memcpy(block + 4, &offset, sizeof(offset));
        const int8_t code = static_cast<int8_t>((n * 37 + k * 11) % 256 - 128);
        block[loader::kPackedBlockHeaderBytes + k % group] = static_cast<uint8_t>(code);
        codes.index_put_({n, k}, static_cast<float>(code));
      }
    }
    const at::Tensor identity = at::eye(in);
    EXPECT_TRUE(at::equal(QuantizedLinearTiles(identity, *packed, at::Tensor()), codes.t()))
        << "groups of " << group;
    EXPECT_TRUE(at::equal(
        QuantizedLinearTiles(identity.narrow(0, 0, 64).to(at::kBFloat16), *packed, at::Tensor()),
        codes.t().narrow(0, 0, 64).to(at::kBFloat16)))
        << "BF16 rows, groups of " << group;
  }
}

TEST_F(QuantizedTiles, EveryInputBitCounts) {
  // Output n's weight is one code 1 at input n (scale 1, offset 0), so each output is exactly
  // its input: every partial sum of hi, mid and lo is a float32. The inputs use all 24
  // significant bits; a kernel that dropped lo, or mid and lo, would be off by up to 2^-16 or
  // 2^-8 of them.
  const int64_t in = 64, out = 64;
  absl::StatusOr<at::Tensor> packed =
      loader::QuantizeLinearWeight(at::zeros({out, in}), loader::PackedLayout{4, out, in, 32}, "w");
  ASSERT_TRUE(packed.ok()) << packed.status();
  const loader::PackedLayout layout = *loader::PackedLayoutOf(*packed);
  auto* bytes = static_cast<uint8_t*>(packed->data_ptr());
  for (int64_t n = 0; n < out; ++n) {
    for (int64_t g = 0; g < layout.groups(); ++g) {
      uint8_t* block = bytes + (n * layout.groups() + g) * layout.block_bytes();
      const float scale = 1.0f, offset = 0.0f;
      std::memcpy(block, &scale, sizeof(scale));
      std::memcpy(block + 4, &offset, sizeof(offset));
      std::memset(block + loader::kPackedBlockHeaderBytes, 0, 16);
      if (g == n / 32) {
        const int64_t k = n % 32;  // byte k % 16: low nibble for inputs 0-15, high for 16-31
        block[loader::kPackedBlockHeaderBytes + k % 16] = k < 16 ? 0x01 : 0x10;
      }
    }
  }
  at::Tensor x = at::empty({20, in});
  for (int64_t r = 0; r < 20; ++r) {
    for (int64_t k = 0; k < in; ++k) {
      // 1.xxx with the lowest mantissa bit set, scaled over several binades, both signs.
      const int32_t mantissa = static_cast<int32_t>((r * in + k) * 2654435761u % 8388608u) | 1;
      const float value = std::ldexp(1.0f + std::ldexp(static_cast<float>(mantissa), -23),
                                     static_cast<int>(k % 9) - 4);
      x.index_put_({r, k}, k % 2 == 0 ? value : -value);
    }
  }
  const at::Tensor y = QuantizedLinearTiles(x, *packed, at::Tensor());
  EXPECT_TRUE(at::equal(y, x)) << "worst " << (y - x).abs().max().item<float>();
}

TEST_F(QuantizedTiles, ARowIsTheSameAloneInAnyChunkAndAtEitherThreadCount) {
  // 67 outputs: two passes of 32 and a tail of 3, two tasks over two threads.
  const at::Tensor packed = Pack(67, 512, 128, 21);
  const at::Tensor bias = SeededRandn({67}, 22);
  ExpectEachRowTheSameAloneInAnyChunkAndAtEitherThreadCount(
      [&](const at::Tensor& rows) { return QuantizedLinearTiles(rows, packed, bias); },
      SeededRandn({70, 512}, 23));
  // 8-bit, one scale per row: four spans of 128.
  const at::Tensor int8 = Pack8(67, 512, 512, 24);
  ExpectEachRowTheSameAloneInAnyChunkAndAtEitherThreadCount(
      [&](const at::Tensor& rows) { return QuantizedLinearTiles(rows, int8, bias); },
      SeededRandn({70, 512}, 25));
}

TEST_F(QuantizedTiles, OutliersAndTinyBlocksStayWithinTheBound) {
  // 4-bit groups of 128, and an 8-bit weight of one scale per row (four spans of 128).
  for (const at::Tensor& packed : {Pack(40, 512, 128, 5), Pack8(40, 512, 512, 8)}) {
    SCOPED_TRACE(testing::Message() << loader::PackedLayoutOf(packed)->bits << " bits");
    at::Tensor x = SeededRandn({40, 512}, 6);
    x.index_put_({0, 7}, 1000.0f);
    x.index_put_({21, 300}, -2500.0f);
    x.narrow(1, 128, 128).mul_(1e-30);
    x.narrow(1, 384, 128).zero_();
    const at::Tensor y = QuantizedLinearTiles(x, packed, at::Tensor());
    ExpectNearFloat64(y, x, packed, at::Tensor(), /*header_bound=*/true);
    EXPECT_TRUE(at::all(at::isfinite(y)).item<bool>());
    // A chunk of only tiny inputs: the float kernels' tolerance.
    const at::Tensor tiny = SeededRandn({20, 512}, 7) * 1e-30;
    ExpectNearFloat64(QuantizedLinearTiles(tiny, packed, at::Tensor()), tiny, packed,
                      at::Tensor());
  }
}

TEST_F(QuantizedTiles, ANonFiniteInputMakesOnlyItsRowNan) {
  const at::Tensor packed = Pack(20, 256, 128, 31);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    at::Tensor x = SeededRandn({33, 256}, 32);
    x.index_put_({17, 140}, bad);
    const at::Tensor y = QuantizedLinearTiles(x, packed, at::Tensor());
    EXPECT_TRUE(at::all(at::isnan(y[17])).item<bool>()) << bad;
    const at::Tensor others = at::cat({y.narrow(0, 0, 17), y.narrow(0, 18, 15)});
    EXPECT_TRUE(at::all(at::isfinite(others)).item<bool>()) << bad;
  }
}

TEST_F(QuantizedTiles, QuantizedLinearSendsPromptChunksOf4BitAnd8BitWeightsHere) {
  for (int64_t group : {32, 64, 128, 256}) {
    const at::Tensor packed = Pack(48, 256, group, 41);
    const loader::PackedLayout layout = *loader::PackedLayoutOf(packed);
    const int64_t most = QuantizedLinearMaxRows(DetectQuantIsa(), layout, at::kFloat);
    for (int64_t rows : {most + 1, int64_t{32}, int64_t{64}, int64_t{128}, int64_t{129}}) {
      if (rows <= most) continue;  // decode rows (checked below)
      const at::Tensor x = SeededRandn({rows, 256}, 42);
      // Groups of 32 (a flush every 12 tdpbf16ps) stay with the kernels they had; groups of
      // 128s go to the digits on AMX-INT8 where they run (digit_tiles_test.cc).
      EXPECT_EQ(at::equal(QuantizedLinear(x, packed, at::Tensor()),
                          QuantizedLinearTiles(x, packed, at::Tensor())),
                group >= 64 && !UsesDigitTilesKernel(x, packed, at::Tensor()))
          << rows << " rows, groups of " << group;
    }
    // Decode rows stay with the decode kernels: another summing order, other last bits.
    const at::Tensor few = SeededRandn({most, 256}, 43);
    if (group == 128 && Int4DigitsKernelRuns()) {
      EXPECT_TRUE(at::equal(QuantizedLinear(few, packed, at::Tensor()),
                            QuantizedLinearInt4Digits(few, packed, at::Tensor())));
    }
    EXPECT_FALSE(at::equal(QuantizedLinear(few, packed, at::Tensor()),
                           QuantizedLinearTiles(few, packed, at::Tensor())));
  }
  // 8-bit weights likewise: F32 chunks past the decode kernels' rows in groups of 64 or more
  // (one scale per row: --quantize int8) but those the digits take, BF16 chunks up to 64 rows;
  // groups of 32 stay.
  for (int64_t group : {32, 64, 128, 256}) {
    const at::Tensor packed = Pack8(48, 256, group, 45);
    const loader::PackedLayout layout = *loader::PackedLayoutOf(packed);
    const int64_t most = QuantizedLinearMaxRows(DetectQuantIsa(), layout, at::kFloat);
    for (int64_t rows : {most + 1, int64_t{64}, int64_t{129}}) {
      const at::Tensor x = SeededRandn({rows, 256}, 46);
      EXPECT_EQ(at::equal(QuantizedLinear(x, packed, at::Tensor()),
                          QuantizedLinearTiles(x, packed, at::Tensor())),
                group >= 64 && !UsesDigitTilesKernel(x, packed, at::Tensor()))
          << rows << " F32 rows, 8-bit groups of " << group;
    }
    const at::Tensor few = SeededRandn({most, 256}, 47);
    EXPECT_FALSE(at::equal(QuantizedLinear(few, packed, at::Tensor()),
                           QuantizedLinearTiles(few, packed, at::Tensor())))
        << most << " F32 rows, 8-bit groups of " << group;
    const int64_t most_bf16 = QuantizedLinearMaxRows(DetectQuantIsa(), layout, at::kBFloat16);
    for (int64_t rows : {most_bf16 + 1, kMostQuantizedTileBf16Rows, kMostQuantizedTileBf16Rows + 1}) {
      const at::Tensor x = SeededRandn({rows, 256}, 48).to(at::kBFloat16);
      EXPECT_EQ(at::equal(QuantizedLinear(x, packed, at::Tensor()),
                          QuantizedLinearTiles(x, packed, at::Tensor())),
                rows <= kMostQuantizedTileBf16Rows)
          << rows << " BF16 rows, 8-bit groups of " << group;
    }
  }
}

TEST_F(QuantizedTiles, Bf16RowsTakeOnePartAndMatchAFloat64Reference) {
  // A BF16 input is its own hi: one tdpbf16ps per 32 inputs, then one rounding to BF16. Within
  // a BF16 rounding of the float64 product (plus the float kernels' tolerance), for groups of
  // 32, 128 and whole rows, 1-100 rows.
  int seed = 500;
  for (auto [out, in, group] : {std::tuple<int64_t, int64_t, int64_t>{67, 384, 128},
                                {32, 256, 32}, {130, 512, 512}}) {
    const at::Tensor packed = Pack(out, in, group, ++seed);
    const at::Tensor w64 = loader::DequantizeLinearWeight(packed, at::kFloat).to(at::kDouble);
    for (int64_t rows : {1, 17, 33, 64, 100}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(testing::Message() << "out " << out << " in " << in << " group " << group
                                        << " rows " << rows << " bias " << with_bias);
        const at::Tensor x = SeededRandn({rows, in}, ++seed).to(at::kBFloat16);
        const at::Tensor bias =
            with_bias ? SeededRandn({out}, ++seed).to(at::kBFloat16) : at::Tensor();
        const at::Tensor y = QuantizedLinearTiles(x, packed, bias);
        ASSERT_EQ(y.scalar_type(), at::kBFloat16);
        at::Tensor reference = at::matmul(x.to(at::kDouble), w64.t());
        if (with_bias) reference = reference + bias.to(at::kDouble);
        const at::Tensor magnitude = at::matmul(x.to(at::kDouble).abs(), w64.abs().t());
        const at::Tensor allowed = reference.abs() * std::ldexp(1.0, -8) + magnitude * 2e-6;
        const at::Tensor error = (y.to(at::kDouble) - reference).abs();
        ASSERT_TRUE(at::all(error <= allowed).item<bool>())
            << "worst " << (error - allowed).max().item<double>();
        // The float32 sums before the rounding are the three-part kernel's on the same inputs
        // widened (mid and lo are zero): the same bits after one rounding to BF16.
        EXPECT_TRUE(at::equal(
            y, QuantizedLinearTiles(x.to(at::kFloat), packed,
                                        with_bias ? bias.to(at::kFloat) : at::Tensor())
                   .to(at::kBFloat16)));
      }
    }
  }
  // QuantizedLinear sends BF16 chunks past the decode kernels' rows here up to 64 rows.
  const at::Tensor packed = Pack(48, 256, 128, 47);
  const int64_t most =
      QuantizedLinearMaxRows(DetectQuantIsa(), *loader::PackedLayoutOf(packed), at::kBFloat16);
  for (int64_t rows : {most + 1, kMostQuantizedTileBf16Rows, kMostQuantizedTileBf16Rows + 1}) {
    const at::Tensor x = SeededRandn({rows, 256}, 48).to(at::kBFloat16);
    EXPECT_EQ(at::equal(QuantizedLinear(x, packed, at::Tensor()),
                        QuantizedLinearTiles(x, packed, at::Tensor())),
              rows <= kMostQuantizedTileBf16Rows)
        << rows << " BF16 rows";
  }
}

TEST_F(QuantizedTiles, TheStartLogNoteNamesItForF32AndBf16Rows) {
  const std::string f32 = PackedKernelsNote(loader::DType::kF32);
  if (DigitTilesRun()) {
    EXPECT_EQ(f32.rfind("packed kernels (F32 rows): AMX-INT8 for prompt chunks of 4-bit and 8-bit "
                        "weights in groups of 128s (each block of 128 inputs as 24-bit integers",
                        0),
              0u)
        << f32;
    EXPECT_NE(f32.find("and AMX tdpbf16ps for other groups of 64 or more (each input as three "
                       "BF16 parts, exact products); "),
              std::string::npos)
        << f32;
  } else {
    EXPECT_EQ(f32.rfind("packed kernels (F32 rows): AMX tdpbf16ps for prompt chunks of 4-bit and "
                        "8-bit weights",
                        0),
              0u)
        << f32;
  }
  const std::string bf16 = PackedKernelsNote(loader::DType::kBF16);
  EXPECT_NE(bf16.find("AMX tdpbf16ps for prompt chunks of up to 64 rows of 4-bit and 8-bit weights"),
            std::string::npos)
      << bf16;
  EXPECT_EQ(PackedKernelsNote(loader::DType::kF16), "");
}

}  // namespace
}  // namespace placer::model
