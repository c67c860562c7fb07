// Prompt chunks of int8 activations on AMX-INT8 (model/int8_activation_tiles.h): 4- and 8-bit
// packed weights times the activations' codes match a float64 product of the same codes and
// scales (decoded from the packed bytes as loader/quantized_layout.h documents them); a row's
// result is bit-identical alone and in any chunk, at any thread count; QuantizedLinear gives
// the tiles the chunks past kMostInt8ActivationVectorRows rows and only the layouts they take.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "model/causal_lm.h"
#include "model/int8_activation_tiles.h"
#include "model/quantized_linear.h"
#include "model/quantized_vnni.h"
#include "tests/model/int8_activation_reference.h"
#include "tests/model/seeded_tensors.h"

namespace placer::model {
namespace {

class Int8ActivationTilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Int8ActivationTilesRun()) GTEST_SKIP() << "this CPU lacks AMX-INT8 (or Linux refused the tiles)";
  }
};

TEST_F(Int8ActivationTilesTest, MatchesAFloat64ProductOfTheSameCodes) {
  int seed = 140;
  // 4-bit groups of 64 (activation blocks of 64), 128, 256 (two blocks a group) and one per
  // output channel (384: three blocks); 8-bit groups of 128, 256 and one per channel; outputs
  // that end inside a tile stripe (1, 7, 65) and past a pass of 32 and a lay-out of 128 (131).
  for (const auto& [out, in, group, bits] : std::vector<std::tuple<int64_t, int64_t, int64_t, int>>{
           {1, 128, 128, 4}, {7, 256, 128, 4}, {65, 512, 256, 4}, {131, 384, 384, 4},
           {1, 64, 64, 4}, {66, 448, 64, 4}, {1, 128, 128, 8}, {7, 256, 256, 8},
           {66, 512, 128, 8}, {131, 384, 384, 8}}) {
    const at::Tensor packed = PackRandomWeight(out, in, group, ++seed, bits);
    ASSERT_TRUE(Int8ActivationTilesApply(*loader::PackedLayoutOf(packed)));
    // One row tile and its padding pair, a pair, a pair and a tile, three pairs and a tail.
    for (int64_t rows : {1, 16, 17, 32, 33, 100}) {
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(testing::Message() << bits << "-bit " << out << "x" << in << " g" << group
                                        << " rows " << rows << " bias " << with_bias);
        at::Tensor x = SeededRandn({rows, in}, ++seed);
        if (rows > 2) x[1].zero_();      // a row of zeros: scale 0, codes 0
        if (rows > 20) x[20].mul_(1e4);  // a row far larger than the others
        const at::Tensor bias = with_bias ? SeededRandn({out}, ++seed) : at::Tensor();
        const at::Tensor y = QuantizedLinearInt8ActivationTiles(x, packed, bias);
        ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, out}));
        std::vector<double> want, magnitude;
        Int8ActivationReference(x, packed, bias, &want, &magnitude);
        // The same codes as the VNNI kernel: the two differ by float rounding only.
        const at::Tensor vnni = QuantizedLinearInt8Activations(x, packed, bias);
        const float* got = y.data_ptr<float>();
        const float* by_vnni = vnni.data_ptr<float>();
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 1e-5 * magnitude[i] + 1e-6) << "output " << i;
          ASSERT_NEAR(got[i], by_vnni[i], 2e-5 * magnitude[i] + 2e-6) << "output " << i;
        }
      }
    }
  }
}

TEST_F(Int8ActivationTilesTest, ARowIsTheSameAloneAndInAnyChunkAtAnyThreadCount) {
  // 37 rows: two row tiles and a padded pair; 301 outputs end in an odd one.
  for (const auto& [with_bias, group, bits] : std::vector<std::tuple<bool, int64_t, int>>{
           {true, 128, 4}, {false, 64, 4}, {true, 512, 4}, {true, 512, 8}, {false, 128, 8}}) {
    const at::Tensor packed = PackRandomWeight(301, 512, group, 7, bits);
    const at::Tensor bias = with_bias ? SeededRandn({301}, 8) : at::Tensor();
    const at::Tensor chunk = SeededRandn({37, 512}, 9);
    const int threads = ComputeThreads();
    SetComputeThreads(2);
    const at::Tensor together = QuantizedLinearInt8ActivationTiles(chunk, packed, bias);
    const at::Tensor shifted = QuantizedLinearInt8ActivationTiles(chunk.narrow(0, 3, 34), packed, bias);
    SetComputeThreads(1);
    for (int64_t r = 0; r < 37; ++r) {
      const at::Tensor alone = QuantizedLinearInt8ActivationTiles(chunk.narrow(0, r, 1), packed, bias);
      ASSERT_TRUE(at::equal(alone[0], together[r])) << bits << "-bit g" << group << " row " << r;
      if (r >= 3) {
        ASSERT_TRUE(at::equal(alone[0], shifted[r - 3])) << "row " << r;
      }
    }
    SetComputeThreads(threads);
  }
}

TEST_F(Int8ActivationTilesTest, QuantizedLinearGivesTheTilesChunksOfTheLayoutsTheyTake) {
  const at::Tensor int4 = PackRandomWeight(64, 256, 128, 11);
  const at::Tensor int8 = PackRandomWeight(64, 256, 256, 13, 8);
  const at::Tensor int4_g32 = PackRandomWeight(64, 256, 32, 12);
  const at::Tensor chunk = SeededRandn({kMostInt8ActivationVectorRows + 1, 256}, 14);
  const at::Tensor step = SeededRandn({kMostInt8ActivationVectorRows, 256}, 15);
  ASSERT_FALSE(Int8ActivationsEnabled());
  EXPECT_FALSE(UsesInt8ActivationTiles(chunk, int4, {})) << "the mode is off";
  SetInt8Activations(true);
  for (const at::Tensor& weight : {int4, int8}) {
    EXPECT_TRUE(UsesInt8ActivationTiles(chunk, weight, {}));
    EXPECT_TRUE(at::equal(QuantizedLinear(chunk, weight, {}),
                          QuantizedLinearInt8ActivationTiles(chunk, weight, {})));
    // Decode steps of up to 16 streams stay on the VNNI kernel.
    EXPECT_TRUE(at::equal(QuantizedLinear(step, weight, {}), QuantizedLinearInt8Activations(step, weight, {})));
  }
  // Activation blocks of 32 (4-bit groups of 32) stay on the VNNI kernel.
  EXPECT_FALSE(Int8ActivationTilesApply(*loader::PackedLayoutOf(int4_g32)));
  EXPECT_FALSE(UsesInt8ActivationTiles(chunk, int4_g32, {}));
  EXPECT_TRUE(at::equal(QuantizedLinear(chunk, int4_g32, {}), QuantizedLinearInt8Activations(chunk, int4_g32, {})));
  SetInt8Activations(false);
}

}  // namespace
}  // namespace placer::model
