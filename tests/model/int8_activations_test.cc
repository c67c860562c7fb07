// --quantize-activations int8 (model/quantized_vnni.h) on every ISA the CPU runs: 4- and 8-bit packed
// weights times activations quantized per 128 inputs match a float64 product of the same
// integer codes and scales, decoded here from the packed bytes as loader/quantized_layout.h
// documents them; a row's result is bit-identical alone and in any batch, whatever the
// thread count; the mode is used only where it applies and stays within the activations'
// rounding of the exact product.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loader/quantized_layout.h"
#include "loader/quantized_weight.h"
#include "model/causal_lm.h"
#include "model/int8_activation_tiles.h"
#include "model/quantized_linear.h"
#include "model/quantized_vnni.h"
#include "tests/model/int8_activation_reference.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

class Int8ActivationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Int8ActivationKernelRuns()) GTEST_SKIP() << "this CPU lacks AVX2";
  }
};

TEST_F(Int8ActivationsTest, MatchesAFloat64ProductOfTheSameCodes) {
  int seed = 40;
  // 4-bit groups of 32 (activation blocks of 32), 64 (blocks of 64), 128, 256 and one per
  // output channel (384); 8-bit ones of 128, 256 and one per channel; outputs that end in 1-3
  // row tails.
  for (const auto& [out, in, group, bits] : std::vector<std::tuple<int64_t, int64_t, int64_t, int>>{
           {1, 128, 128, 4}, {7, 256, 128, 4}, {65, 512, 256, 4}, {130, 384, 384, 4}, {3, 64, 32, 4},
           {67, 320, 32, 4}, {1, 64, 64, 4}, {66, 448, 64, 4}, {1, 128, 128, 8}, {7, 256, 256, 8}, {66, 512, 128, 8}, {131, 384, 384, 8}}) {
    const at::Tensor packed = PackRandomWeight(out, in, group, ++seed, bits);
    ASSERT_TRUE(Int8ActivationKernelApplies(*loader::PackedLayoutOf(packed)));
    // Tiles of 8 rows (2 weight rows each, their 16 outputs summed as one vector) and every
    // shorter tail.
    for (int64_t rows : {1, 2, 3, 4, 5, 8, 9, 16, 21}) {
      for (bool with_bias : {false, true}) {
       for (Int8ActivationIsa isa : RunnableInt8ActivationIsas()) {
        SCOPED_TRACE(testing::Message() << bits << "-bit " << out << "x" << in << " g" << group << " rows " << rows
                                        << " bias " << with_bias << " " << Int8ActivationIsaName(isa));
        at::Tensor x = SeededRandn({rows, in}, ++seed);
        if (rows > 2) x[1].zero_();  // a row of zeros: scale 0, codes 0
        if (rows > 10) x[10].mul_(1e4);  // a row far larger than the others
        const at::Tensor bias = with_bias ? SeededRandn({out}, ++seed) : at::Tensor();
        const at::Tensor y = QuantizedLinearInt8Activations(x, packed, bias, isa);
        ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, out}));
        std::vector<double> want, magnitude;
        Int8ActivationReference(x, packed, bias, &want, &magnitude);
        const float* got = y.data_ptr<float>();
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 1e-5 * magnitude[i] + 1e-6) << "output " << i;
        }
        // Within the activations' rounding of the exact product (at most half a step of
        // max|x| / 127 per input).
        const at::Tensor exact = QuantizedLinearKernel(x, packed, bias, DetectQuantIsa());
        const double scale = (x.abs().max().item<float>() / 127.0) *
                             loader::DequantizeLinearWeight(packed, at::kFloat).abs().sum(1).max().item<float>();
        EXPECT_LE((y - exact).abs().max().item<float>(), 0.5 * scale + 1e-5);
       }
      }
    }
  }
}

// The largest products the kernels meet: 8-bit codes of -128 and +-127 (as GPTQ and
// compressed-tensors checkpoints can hold) times activation codes of +-127 whose signs follow the
// weights', so every product is positive and as large as it gets. vpmaddubsw (AVX2) adds two
// products into an int16 lane: the kernels must keep each pair within it (q + 128 would not).
TEST_F(Int8ActivationsTest, ExtremeCodesAreExact) {
  for (const auto& [in, group] : std::vector<std::pair<int64_t, int64_t>>{{256, 128}, {384, 384}}) {
    const int64_t out = 6;
    at::Tensor packed = PackRandomWeight(out, in, group, 90, 8).clone();
    const loader::PackedLayout layout = *loader::PackedLayoutOf(packed);
    const int64_t groups = in / group, block_bytes = loader::kPackedBlockHeaderBytes + group;
    uint8_t* bytes = static_cast<uint8_t*>(packed.data_ptr());
    at::Tensor x = at::empty({3, in}, at::kFloat);
    for (int64_t n = 0; n < out; ++n) {
      for (int64_t c = 0; c < in; ++c) {
        // Row 0 all -128, row 1 all +127, the others -128, 127, -127 in turn.
        const int8_t code = n == 0 ? -128 : n == 1 ? 127 : (c % 3 == 0 ? -128 : c % 3 == 1 ? 127 : -127);
        bytes[(n * groups + c / group) * block_bytes + loader::kPackedBlockHeaderBytes + c % group] =
            static_cast<uint8_t>(code);
      }
    }
    for (int64_t c = 0; c < in; ++c) {
      x[0][c] = -1.0f;                         // codes -127: with row 0, products of 128 · 127
      x[1][c] = 1.0f;                          // +127
      x[2][c] = c % 3 == 1 ? 2.0f : -2.0f;     // the signs of rows 2-5's codes
    }
    ASSERT_EQ(layout.bits, 8);
    for (Int8ActivationIsa isa : RunnableInt8ActivationIsas()) {
      SCOPED_TRACE(testing::Message() << in << " g" << group << " " << Int8ActivationIsaName(isa));
      const at::Tensor y = QuantizedLinearInt8Activations(x, packed, at::Tensor(), isa);
      std::vector<double> want, magnitude;
      Int8ActivationReference(x, packed, at::Tensor(), &want, &magnitude);
      const float* got = y.data_ptr<float>();
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-5 * magnitude[i] + 1e-6) << "output " << i;
      }
    }
  }
}

// The AVX-VNNI and AVX2 kernels are the AVX-512 one on 8-lane halves, summed in
// _mm512_reduce_add_ps's order, with the same integer dots: a server moved between CPU kinds
// gives the same tokens.
TEST_F(Int8ActivationsTest, EveryIsaGivesTheSameBits) {
  const std::vector<Int8ActivationIsa>& runnable = RunnableInt8ActivationIsas();
  if (runnable.size() < 2) GTEST_SKIP() << "this CPU runs one of AVX512-VNNI, AVX-VNNI and AVX2";
  int seed = 70;
  for (const auto& [out, in, group, bits] : std::vector<std::tuple<int64_t, int64_t, int64_t, int>>{
           {5, 128, 128, 4}, {66, 512, 256, 4}, {33, 384, 384, 4}, {9, 192, 32, 4},
           {7, 192, 64, 4}, {5, 128, 128, 8}, {33, 384, 384, 8}}) {
    const at::Tensor packed = PackRandomWeight(out, in, group, ++seed, bits);
    for (int64_t rows : {1, 3, 8, 13}) {
      for (bool with_bias : {false, true}) {
        at::Tensor x = SeededRandn({rows, in}, ++seed);
        if (rows > 2) x[1].zero_();
        const at::Tensor bias = with_bias ? SeededRandn({out}, ++seed) : at::Tensor();
        const at::Tensor best = QuantizedLinearInt8Activations(x, packed, bias, runnable[0]);
        for (size_t i = 1; i < runnable.size(); ++i) {
          const at::Tensor other = QuantizedLinearInt8Activations(x, packed, bias, runnable[i]);
          ASSERT_TRUE(at::equal(best, other))
              << Int8ActivationIsaName(runnable[i]) << " vs " << Int8ActivationIsaName(runnable[0]) << ": "
              << bits << "-bit " << out << "x" << in << " g" << group << " rows " << rows << " bias "
              << with_bias << ": largest difference " << (best - other).abs().max().item<float>();
        }
      }
    }
  }
}

TEST_F(Int8ActivationsTest, ARowIsTheSameAloneAndInAnyBatchAtAnyThreadCount) {
  // 29 rows: three tiles of 8 rows and a tail of 4 and 1; 301 outputs end in an odd one.
  for (const auto& [with_bias, group, bits] : std::vector<std::tuple<bool, int64_t, int>>{
           {true, 128, 4}, {false, 128, 4}, {true, 32, 4}, {true, 64, 4}, {true, 512, 8}, {false, 128, 8}}) {
    const at::Tensor packed = PackRandomWeight(301, 512, group, 7, bits);
    const at::Tensor bias = with_bias ? SeededRandn({301}, 8) : at::Tensor();
    const at::Tensor batch = SeededRandn({29, 512}, 9);
    for (Int8ActivationIsa isa : RunnableInt8ActivationIsas()) {
      SCOPED_TRACE(Int8ActivationIsaName(isa));
      const int threads = ComputeThreads();
      SetComputeThreads(2);
      const at::Tensor together = QuantizedLinearInt8Activations(batch, packed, bias, isa);
      const at::Tensor shifted =
          QuantizedLinearInt8Activations(batch.narrow(0, 3, 26), packed, bias, isa);
      SetComputeThreads(1);
      for (int64_t r = 0; r < 29; ++r) {
        const at::Tensor alone = QuantizedLinearInt8Activations(batch.narrow(0, r, 1), packed, bias, isa);
        ASSERT_TRUE(at::equal(alone[0], together[r])) << bits << "-bit row " << r << " bias " << with_bias;
        if (r >= 3) {
          ASSERT_TRUE(at::equal(alone[0], shifted[r - 3])) << "row " << r;
        }
      }
      SetComputeThreads(threads);
    }
  }
}

TEST_F(Int8ActivationsTest, TheModeTakesOnlyTheWeightsItApplies) {
  const at::Tensor int4 = PackRandomWeight(64, 256, 128, 11);
  const at::Tensor int4_g32 = *loader::QuantizeLinearWeight(SeededRandn({64, 256}, 12),
                                                            loader::PackedLayout{4, 64, 256, 32}, "w");
  const at::Tensor int4_g64 = *loader::QuantizeLinearWeight(SeededRandn({64, 256}, 16),
                                                            loader::PackedLayout{4, 64, 256, 64}, "w");
  const at::Tensor int8 = *loader::QuantizeLinearWeight(SeededRandn({64, 256}, 13),
                                                        loader::PackedLayout{8, 64, 256, 256}, "w");
  const at::Tensor int8_g64 = *loader::QuantizeLinearWeight(SeededRandn({64, 256}, 17),
                                                            loader::PackedLayout{8, 64, 256, 64}, "w");
  const at::Tensor x = SeededRandn({3, 256}, 14);
  SetInt8Activations(false);
  EXPECT_FALSE(UsesInt8Activations(int4));
  // Off: the weight-only kernels (float32 rows of 4-bit groups of 128s: the three-digit kernel
  // where VNNI runs, which rounds no activation to 8 bits).
  const at::Tensor weight_only = UsesInt4DigitsKernel(x, int4, {})
                                     ? QuantizedLinearInt4Digits(x, int4, {})
                                     : QuantizedLinearKernel(x, int4, {}, DetectQuantIsa());
  EXPECT_TRUE(at::equal(QuantizedLinear(x, int4, {}), weight_only));
  SetInt8Activations(true);
  EXPECT_TRUE(UsesInt8Activations(int4));
  EXPECT_TRUE(UsesInt8Activations(int4_g32));
  EXPECT_TRUE(UsesInt8Activations(int4_g64));
  EXPECT_TRUE(at::equal(QuantizedLinear(x, int4_g64, {}), QuantizedLinearInt8Activations(x, int4_g64, {})));
  EXPECT_TRUE(at::equal(QuantizedLinear(x, int4_g32, {}), QuantizedLinearInt8Activations(x, int4_g32, {})));
  EXPECT_TRUE(UsesInt8Activations(int8));
  EXPECT_FALSE(UsesInt8Activations(int8_g64));
  EXPECT_TRUE(at::equal(QuantizedLinear(x, int4, {}), QuantizedLinearInt8Activations(x, int4, {})));
  EXPECT_TRUE(at::equal(QuantizedLinear(x, int8, {}), QuantizedLinearInt8Activations(x, int8, {})));
  EXPECT_TRUE(at::equal(QuantizedLinear(x, int8_g64, {}), QuantizedLinearKernel(x, int8_g64, {}, DetectQuantIsa())));
  // Prompt chunks take it too (beyond the float kernels' rows), or on AMX-INT8 the tiles
  // (int8_activation_tiles_test.cc).
  const at::Tensor chunk = SeededRandn({200, 256}, 15);
  EXPECT_TRUE(at::equal(QuantizedLinear(chunk, int4, {}),
                        Int8ActivationTilesRun() ? QuantizedLinearInt8ActivationTiles(chunk, int4, {})
                                                 : QuantizedLinearInt8Activations(chunk, int4, {})));
  SetInt8Activations(false);
  EXPECT_TRUE(at::equal(QuantizedLinear(x, int8, {}), QuantizedLinearKernel(x, int8, {}, DetectQuantIsa())));
}

}  // namespace
}  // namespace placer::model
