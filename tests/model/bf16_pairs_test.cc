// BF16 weights in pair order (model/bf16_pairs.h): the order itself, the products against a
// float64 sum of the same BF16 products (1 to 8 rows a pass and their tails, loops of 64 rows,
// biases), each row bit-identical alone and batched, the one-loop product of several weights
// bit for bit the single ones, operands refused by name;
// and in a served model, the layers held in host memory packed on their first call (only those
// the hook promises) with logits unchanged by it and close to the [out, in] kernels'. The
// products run where the CPU has AVX512-BF16 (skipped elsewhere: the vector kernels' tests cover
// those CPUs); the order and the repacker's choice run on every CPU.
#include "model/bf16_pairs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "model/bf16_repacker.h"
#include "model/bf16_tiles.h"
#include "model/causal_lm.h"
#include "runtime/block_hook.h"
#include "tests/model/bf16_layout_checks.h"
#include "tests/model/served_bf16_fixture.h"

namespace placer::model {
namespace {


using bf16_layout_checks::ErrorOf;
using bf16_layout_checks::RandomBf16;

#define SKIP_WITHOUT_AVX512_BF16()                                                          \
  if (!Bf16PairsRun()) GTEST_SKIP() << "this CPU (or PLACER_BF16_PAIRS=0) has no AVX512-BF16"


TEST(Bf16Pairs, TheOrderIsGroupsOf32OutputsPairByPair) {
  // Packing moves memory only: no AVX512-BF16 needed. 3 groups of 32 outputs, 5 input pairs.
  const at::Tensor w = RandomBf16({96, 10}, 1);
  const at::Tensor pairs = PackBf16Pairs(w);
  ASSERT_TRUE(IsBf16PairWeight(pairs));
  EXPECT_EQ(pairs.sizes(), (at::IntArrayRef{3, 5, 32, 2}));
  // Group 1, pair 3: outputs 32-63, inputs 6 and 7.
  EXPECT_TRUE(at::equal(pairs[1][3], w.narrow(0, 32, 32).narrow(1, 6, 2)));
  EXPECT_TRUE(at::equal(pairs[2][0], w.narrow(0, 64, 32).narrow(1, 0, 2)));
  EXPECT_TRUE(at::equal(UnpackBf16Pairs(pairs), w));
  EXPECT_FALSE(IsBf16PairWeight(w));
  EXPECT_FALSE(IsBf16PairWeight(pairs.to(at::kFloat)));
  EXPECT_NE(ErrorOf([] { PackBf16Pairs(RandomBf16({48, 64}, 9)); }).find("multiple of 32"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { PackBf16Pairs(RandomBf16({32, 63}, 9)); }).find("in even"),
            std::string::npos);
}

TEST(Bf16Pairs, ProductsMatchAFloat64Reference) {
  SKIP_WITHOUT_AVX512_BF16();
  int seed = 10;
  for (const auto& [out, in] : std::vector<std::pair<int64_t, int64_t>>{
           {32, 2}, {64, 34}, {96, 150}, {160, 768}, {256, 1030}}) {
    const at::Tensor w = RandomBf16({out, in}, ++seed);
    const at::Tensor pairs = PackBf16Pairs(w);
    // 64 rows a parallel loop: 67 and 130 take two and three.
    for (int64_t rows : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{8}, int64_t{9}, int64_t{23},
                         int64_t{64}, int64_t{67}, int64_t{130}}) {
      for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {
        SCOPED_TRACE(testing::Message() << "out " << out << " in " << in << " rows " << rows
                                        << " bias " << bias_kind);
        const at::Tensor x = RandomBf16({rows, in}, ++seed);
        at::Tensor bias;
        if (bias_kind == 1) bias = RandomBf16({out}, ++seed);
        if (bias_kind == 2) bias = at::randn({out});
        bf16_layout_checks::ExpectMatchesFloat64(Bf16PairLinear(x, pairs, bias), x, w, bias);
      }
    }
  }
}

TEST(Bf16Pairs, ARowIsTheSameAloneAndInAnyBatch) {
  SKIP_WITHOUT_AVX512_BF16();
  // 70 rows: a loop of 64 (eight passes of 8) and one of 6; 3 groups.
  const at::Tensor w = RandomBf16({96, 226}, 3);
  const at::Tensor pairs = PackBf16Pairs(w);
  const at::Tensor bias = RandomBf16({96}, 4);
  const at::Tensor x = RandomBf16({70, 226}, 5);
  bf16_layout_checks::ExpectRowsAsInTheBatch(
      [&](const at::Tensor& rows) { return Bf16PairLinear(rows, pairs, bias); }, x, 3);
}

TEST(Bf16Pairs, SeveralWeightsInOneLoopGiveEachWeightsOwnResult) {
  SKIP_WITHOUT_AVX512_BF16();
  // q, k and v of different widths (one of 3 groups: a task of 2 and one of 1), one bias.
  const at::Tensor x = RandomBf16({5, 128}, 20);
  const std::vector<at::Tensor> weights = {PackBf16Pairs(RandomBf16({96, 128}, 21)),
                                           PackBf16Pairs(RandomBf16({32, 128}, 22)),
                                           PackBf16Pairs(RandomBf16({64, 128}, 23))};
  const std::vector<at::Tensor> biases = {at::Tensor(), at::randn({32}), at::Tensor()};
  for (int64_t rows : {int64_t{1}, int64_t{5}}) {
    const at::Tensor rows_x = x.narrow(0, 0, rows);
    const std::vector<at::Tensor> together = Bf16PairLinears(rows_x, weights, biases);
    ASSERT_EQ(together.size(), 3u);
    for (size_t i = 0; i < weights.size(); ++i) {
      EXPECT_TRUE(at::equal(together[i], Bf16PairLinear(rows_x, weights[i], biases[i])))
          << "weight " << i << ", " << rows << " rows";
    }
  }
}

TEST(Bf16Pairs, OperandsTheKernelCannotTakeAreRefusedNamingThem) {
  SKIP_WITHOUT_AVX512_BF16();
  bf16_layout_checks::ExpectOperandsRefused(&Bf16PairLinear, PackBf16Pairs(RandomBf16({32, 64}, 6)), "not in pair order");
}

class ServedBf16Pairs : public ServedBf16Model {
 protected:
  ServedBf16Pairs() : ServedBf16Model("pairs", 37) {}
};

TEST_F(ServedBf16Pairs, LayersInHostMemoryArePackedOnTheirFirstCallOnly) {
  const auto packed = PackedSlotsOfAMixedMap(&IsBf16PairWeight);
  const bool pairs = Bf16PairsRun() && !Bf16TilesRun();
  EXPECT_EQ(packed.at("model.layers.0"), pairs ? LayerZeroLinears() : std::vector<std::string>{});
  EXPECT_TRUE(packed.at("model.layers.1").empty()) << "disk blocks stay in the mapped file";
  EXPECT_TRUE(packed.at("model.layers.2").empty()) << "a (virtual) GPU keeps its weights";
  EXPECT_EQ(packed.at("lm_head"),
            pairs ? std::vector<std::string>{"lm_head.weight"} : std::vector<std::string>{});
  EXPECT_TRUE(packed.at("model.embed_tokens").empty());
}

TEST_F(ServedBf16Pairs, PackingLeavesLogitsAloneAndCloseToTheBoundWeightsKernels) {
  // Three decode steps against the [out, in] vector kernels, to BF16 precision.
  EXPECT_LT(RepackedAgainstBoundWeights({201, 7, 88}), 0.05)
      << "the pair kernels drift from the vector kernels' logits";
}

}  // namespace
}  // namespace placer::model
