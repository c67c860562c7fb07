// The AMX-INT8 prompt-chunk kernel for float32 rows as digits (digit_tiles.h) against float64
// products of the exactly dequantized weight, within its header's bound: 4-bit groups of 128,
// 256 and one per row, 8-bit ones per row, of 128 and with zero points; 1-100 rows (one row
// tile, a padded pair, several pairs), 3-130 outputs (passes, tails), bias or none; every
// 8-bit code right to float rounding; each row bit-identical alone, in any chunk and at either
// thread count; outliers, tiny and zero blocks; non-finite inputs spoiling only their row; what
// QuantizedLinear sends here, and what it does not.
#include "model/digit_tiles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "loader/quantized_weight.h"
#include "model/quantized_linear.h"
#include "model/quantized_tiles.h"
#include "tests/model/chunk_invariance_checks.h"
#include "tests/model/int4_digit_checks.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

using int4_digit_checks::ExpectWithinTheBound;

// 4-bit weights with offsets other than -8 s (int4_digit_checks::Pack), or 8-bit ones whose
// blocks carry random zero points m = -z·s, z in [-9, 9].
at::Tensor Pack(int bits, int64_t out, int64_t in, int64_t group, int seed) {
  if (bits == 4) return int4_digit_checks::Pack(out, in, group, seed);
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

class DigitTiles : public testing::Test {
 protected:
  void SetUp() override {
    if (!DigitTilesRun()) GTEST_SKIP() << "this CPU has no AMX-INT8 (or PLACER_DIGIT_TILES=0)";
  }
};

TEST_F(DigitTiles, ProductsMatchAFloat64ReferenceWithinTheBound) {
  struct Shape {
    int bits;
    int64_t out, in, group;
  };
  const Shape shapes[] = {{4, 32, 128, 128}, {4, 3, 256, 128},  {4, 67, 384, 384},
                          {4, 130, 768, 256}, {8, 67, 384, 384}, {8, 130, 768, 128},
                          {8, 17, 2048, 2048}, {8, 40, 512, 256}};
  int seed = 900;
  for (const Shape& shape : shapes) {
    const at::Tensor packed = Pack(shape.bits, shape.out, shape.in, shape.group, ++seed);
    for (int64_t rows : {1, 16, 17, 33, 64, 100}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(testing::Message() << shape.bits << " bits, out " << shape.out << " in "
                                        << shape.in << " group " << shape.group << " rows "
                                        << rows << " bias " << with_bias);
        const at::Tensor x = SeededRandn({rows, shape.in}, ++seed);
        const at::Tensor bias = with_bias ? SeededRandn({shape.out}, ++seed) : at::Tensor();
        const at::Tensor y = QuantizedLinearDigitTiles(x, packed, bias);
        ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, shape.out}));
        ExpectWithinTheBound(y, x, packed, bias);
      }
    }
  }
}

TEST_F(DigitTiles, EveryEightBitCodeIsRightToFloatRounding) {
  // Scale 1, offset 0, and the identity as inputs: output n of row k is code (n, k) times
  // v · t = 127 · 2^16 · t (1 up to the rounding of t), so a code widened with the wrong sign,
  // in the wrong order or a digit lost shows. Codes cycle through all 256 values; 4-bit codes
  // (every one of 0-15) likewise.
  const int64_t out = 64, in = 256;
  for (int bits : {8, 4}) {
    absl::StatusOr<at::Tensor> packed = loader::QuantizeLinearWeight(
        at::zeros({out, in}), loader::PackedLayout{bits, out, in, 128}, "w");
    ASSERT_TRUE(packed.ok()) << packed.status();
    const loader::PackedLayout layout = *loader::PackedLayoutOf(*packed);
    auto* bytes = static_cast<uint8_t*>(packed->data_ptr());
    at::Tensor codes = at::empty({out, in});
    for (int64_t n = 0; n < out; ++n) {
      for (int64_t g = 0; g < layout.groups(); ++g) {
        uint8_t* block = bytes + (n * layout.groups() + g) * layout.block_bytes();
        const float scale = 1.0f, offset = 0.0f;
        std::memcpy(block, &scale, sizeof(scale));
        std::memcpy(block + 4, &offset, sizeof(offset));
        std::memset(block + loader::kPackedBlockHeaderBytes, 0, layout.block_bytes() - 8);
      }
      for (int64_t k = 0; k < in; ++k) {
        uint8_t* payload = bytes + (n * layout.groups() + k / 128) * layout.block_bytes() +
                           loader::kPackedBlockHeaderBytes;
        const int64_t i = k % 128;
        if (bits == 8) {
          const int8_t code = static_cast<int8_t>((n * 37 + k * 11) % 256 - 128);
          payload[i] = static_cast<uint8_t>(code);
          codes.index_put_({n, k}, static_cast<float>(code));
        } else {
          const int code = static_cast<int>((n * 5 + k * 3) % 16);
          // 32 inputs per 16 bytes: byte j holds input j (low nibble) and j + 16 (high).
          uint8_t& byte = payload[(i / 32) * 16 + i % 16];
          byte = static_cast<uint8_t>(byte | (i % 32 < 16 ? code : code << 4));
          codes.index_put_({n, k}, static_cast<float>(code));
        }
      }
    }
    const at::Tensor y = QuantizedLinearDigitTiles(at::eye(in), *packed, at::Tensor());
    const at::Tensor error = (y - codes.t()).abs();
    EXPECT_TRUE(at::all(error <= codes.t().abs() * std::ldexp(1.0, -22)).item<bool>())
        << bits << " bits: worst " << error.max().item<float>();
  }
}

TEST_F(DigitTiles, ARowIsTheSameAloneInAnyChunkAndAtEitherThreadCount) {
  for (int bits : {4, 8}) {
    SCOPED_TRACE(testing::Message() << bits << " bits");
    // 67 outputs: three tasks of 32 (the last 3) over two threads; 70 rows: six row tiles of
    // digits arranged over two threads.
    const at::Tensor packed = Pack(bits, 67, 512, 128, 21);
    const at::Tensor bias = SeededRandn({67}, 22);
    ExpectEachRowTheSameAloneInAnyChunkAndAtEitherThreadCount(
        [&](const at::Tensor& rows) { return QuantizedLinearDigitTiles(rows, packed, bias); },
        SeededRandn({70, 512}, 23));
  }
}

TEST_F(DigitTiles, OutliersTinyAndZeroBlocksStayWithinTheBound) {
  for (int bits : {4, 8}) {
    SCOPED_TRACE(testing::Message() << bits << " bits");
    const at::Tensor packed = Pack(bits, 40, 512, bits == 4 ? 128 : 512, 5);
    at::Tensor x = SeededRandn({40, 512}, 6);
    x.index_put_({0, 7}, 1000.0f);
    x.index_put_({21, 300}, -2500.0f);
    x.narrow(1, 128, 128).mul_(1e-30);
    x.narrow(1, 384, 128).zero_();
    const at::Tensor y = QuantizedLinearDigitTiles(x, packed, at::Tensor());
    ExpectWithinTheBound(y, x, packed, at::Tensor());
    EXPECT_TRUE(at::all(at::isfinite(y)).item<bool>());
    // A chunk of only tiny inputs: within the bound.
    const at::Tensor tiny = SeededRandn({20, 512}, 7) * 1e-30;
    ExpectWithinTheBound(QuantizedLinearDigitTiles(tiny, packed, at::Tensor()), tiny, packed,
                         at::Tensor());
    // Blocks whose largest input is below ~2^-105 have a subnormal step: their products keep
    // float32's absolute error near zero, not its relative error.
    const at::Tensor subnormal = SeededRandn({20, 512}, 8) * 1e-38;
    const at::Tensor w64 = loader::DequantizeLinearWeight(packed, at::kFloat).to(at::kDouble);
    const at::Tensor off = (QuantizedLinearDigitTiles(subnormal, packed, at::Tensor()).to(at::kDouble) -
                            at::matmul(subnormal.to(at::kDouble), w64.t()))
                               .abs();
    EXPECT_LT(off.max().item<double>(), 1e-35);
  }
}

TEST_F(DigitTiles, ANonFiniteInputMakesOnlyItsRowNan) {
  const at::Tensor packed = Pack(4, 20, 256, 128, 31);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    at::Tensor x = SeededRandn({33, 256}, 32);
    x.index_put_({17, 140}, bad);
    const at::Tensor y = QuantizedLinearDigitTiles(x, packed, at::Tensor());
    EXPECT_TRUE(at::all(at::isnan(y[17])).item<bool>()) << bad;
    const at::Tensor others = at::cat({y.narrow(0, 0, 17), y.narrow(0, 18, 15)});
    EXPECT_TRUE(at::all(at::isfinite(others)).item<bool>()) << bad;
  }
}

TEST_F(DigitTiles, QuantizedLinearSendsFloat32PromptChunksOfGroupsOf128sHere) {
  for (int bits : {4, 8}) {
    for (int64_t group : {64, 128, 256}) {
      const at::Tensor packed = Pack(bits, 48, 256, group, 41);
      const loader::PackedLayout layout = *loader::PackedLayoutOf(packed);
      const int64_t most = QuantizedLinearMaxRows(DetectQuantIsa(), layout, at::kFloat);
      for (int64_t rows : {most + 1, int64_t{64}, int64_t{129}}) {
        const at::Tensor x = SeededRandn({rows, 256}, 42);
        const at::Tensor y = QuantizedLinear(x, packed, at::Tensor());
        // Groups of 64 keep the exact BF16 tiles.
        EXPECT_EQ(UsesDigitTilesKernel(x, packed, at::Tensor()), group >= 128);
        EXPECT_TRUE(at::equal(y, group >= 128 ? QuantizedLinearDigitTiles(x, packed, at::Tensor())
                                              : QuantizedLinearTiles(x, packed, at::Tensor())))
            << bits << " bits, groups of " << group << ", " << rows << " rows";
      }
      // Decode rows stay with the decode kernels; BF16 rows with the BF16 tiles.
      if (group >= 128) {
        const at::Tensor few = SeededRandn({most, 256}, 43);
        EXPECT_FALSE(at::equal(QuantizedLinear(few, packed, at::Tensor()),
                               QuantizedLinearDigitTiles(few, packed, at::Tensor())));
        const at::Tensor bf16 = SeededRandn({32, 256}, 44).to(at::kBFloat16);
        EXPECT_FALSE(UsesDigitTilesKernel(bf16, packed, at::Tensor()));
        EXPECT_THROW(QuantizedLinearDigitTiles(bf16, packed, at::Tensor()), c10::Error);
      }
    }
  }
}

}  // namespace
}  // namespace placer::model
