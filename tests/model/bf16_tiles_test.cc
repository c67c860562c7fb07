// BF16 weights in AMX tile order (model/bf16_tiles.h): the order itself, the products against a
// float64 sum of the same BF16 products (group tails, odd row counts, biases, the unpacked GEMM
// past kMostTileRows), on the vectors up to kMostTileVectorRows rows and on the tiles past
// them, each row bit-identical in any call of either range, operands refused by name; and
// in a served model, the layers' weights packed on their first call (and only those the hook
// promises) with logits unchanged by it. The products run where the CPU has AMX (skipped
// elsewhere: the vector kernels' tests cover those CPUs); the order, the repacker's refusal and
// the served model's weights left as bound run on every CPU.
#include "model/bf16_tiles.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/bf16_repacker.h"
#include "model/bf16_tile_rows.h"
#include "model/causal_lm.h"
#include "runtime/block_hook.h"
#include "tests/model/bf16_layout_checks.h"
#include "tests/model/served_bf16_fixture.h"

namespace placer::model {
namespace {


using bf16_layout_checks::RandomBf16;

#define SKIP_WITHOUT_AMX()                                                              \
  if (!Bf16TilesRun()) GTEST_SKIP() << "this CPU (or PLACER_BF16_TILES=0) has no AMX tiles"

TEST(Bf16Tiles, TheOrderIsGroupsOfFourStripesKBlockByKBlock) {
  // Packing moves memory only: no AMX needed.
  // 5 stripes: a group of 4 and a group of 1; 3 blocks of 32 inputs.
  const at::Tensor w = RandomBf16({80, 96}, 1);
  const at::Tensor tiles = PackBf16Tiles(w);
  ASSERT_TRUE(IsBf16TileWeight(tiles));
  EXPECT_EQ(tiles.sizes(), (at::IntArrayRef{5, 3, 16, 32}));
  const at::Tensor flat = tiles.reshape({-1});
  const auto block = [&](int64_t offset_blocks) { return flat.narrow(0, offset_blocks * 512, 512).view({16, 32}); };
  // Stripe 2, k-block 1: group 0, block (1 * 4 + 2).
  EXPECT_TRUE(at::equal(block(1 * 4 + 2), w.narrow(0, 32, 16).narrow(1, 32, 32)));
  // Stripe 4 (alone in group 1, after group 0's 4 x 3 blocks), k-block 2.
  EXPECT_TRUE(at::equal(block(12 + 2), w.narrow(0, 64, 16).narrow(1, 64, 32)));
  EXPECT_TRUE(at::equal(UnpackBf16Tiles(tiles), w));
  EXPECT_FALSE(IsBf16TileWeight(w));
  EXPECT_FALSE(IsBf16TileWeight(tiles.to(at::kFloat)));
  try {
    PackBf16Tiles(RandomBf16({20, 64}, 9));
    ADD_FAILURE() << "20 outputs packed";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("multiple of 16"), std::string::npos)
        << e.what_without_backtrace();
  }
}

TEST(Bf16Tiles, ProductsMatchAFloat64Reference) {
  SKIP_WITHOUT_AMX();
  int seed = 10;
  for (const auto& [out, in] : std::vector<std::pair<int64_t, int64_t>>{
           {16, 32}, {80, 96}, {96, 160}, {112, 64}, {256, 1024}}) {
    const at::Tensor w = RandomBf16({out, in}, ++seed);
    const at::Tensor tiles = PackBf16Tiles(w);
    for (int64_t rows : {int64_t{1}, int64_t{3}, kMostTileVectorRows, kMostTileVectorRows + 1,
                         int64_t{16}, int64_t{17}, int64_t{40}, kMostTileRows, kMostTileRows + 5}) {
      for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {
        SCOPED_TRACE(testing::Message() << "out " << out << " in " << in << " rows " << rows
                                        << " bias " << bias_kind);
        const at::Tensor x = RandomBf16({rows, in}, ++seed);
        at::Tensor bias;
        if (bias_kind == 1) bias = RandomBf16({out}, ++seed);
        if (bias_kind == 2) bias = at::randn({out});
        // The unpacked GEMM adds a BF16 bias (ATen's linear): the reference rounds it the same.
        const at::Tensor added =
            bias.defined() && rows > kMostTileRows ? bias.to(at::kBFloat16) : bias;
        bf16_layout_checks::ExpectMatchesFloat64(Bf16TileLinear(x, tiles, bias), x, w, added);
        // The few rows the vectors take, on the tiles too (as a step of more streams has them).
        if (rows <= kMostTileVectorRows) {
          bf16_layout_checks::ExpectMatchesFloat64(Bf16TileLinearOnTiles(x, tiles, bias), x, w,
                                                   added);
        }
      }
    }
  }
}

TEST(Bf16Tiles, ARowIsTheSameInAnyCallOfMoreThanTheVectorRowsUpToTheTileRows) {
  SKIP_WITHOUT_AMX();
  // 40 rows: two full B tiles and a tail of 8; 5 stripes (a group and a tail stripe).
  const at::Tensor w = RandomBf16({80, 224}, 3);
  const at::Tensor tiles = PackBf16Tiles(w);
  const at::Tensor bias = RandomBf16({80}, 4);
  const at::Tensor x = RandomBf16({40, 224}, 5);
  const at::Tensor batched = Bf16TileLinear(x, tiles, bias);
  // Each row last in a call of the fewest rows the tiles take, and in one of 17.
  for (int64_t before : {kMostTileVectorRows, int64_t{16}}) {
    for (int64_t r = 0; r < x.size(0); ++r) {
      const at::Tensor call =
          at::cat({x.narrow(0, (r + 7) % (x.size(0) - before + 1), before), x.narrow(0, r, 1)});
      EXPECT_TRUE(at::equal(Bf16TileLinear(call, tiles, bias)[before], batched[r]))
          << "row " << r << " after " << before;
    }
  }
  // Alone, a row is on the vectors, as Bf16TileRowsOfGroups multiplies it.
  ASSERT_TRUE(Bf16TileRowsRun()) << "an AMX CPU without AVX512-BF16";
  const at::Tensor row = x.narrow(0, 5, 1).contiguous();
  at::Tensor vector_row = at::empty({1, 80}, row.options());
  const at::Tensor bias32 = bias.to(at::kFloat);
  const Bf16TileRowsOperands op{
      reinterpret_cast<const uint16_t*>(row.data_ptr<at::BFloat16>()),
      reinterpret_cast<const uint16_t*>(tiles.data_ptr<at::BFloat16>()), bias32.data_ptr<float>(),
      reinterpret_cast<uint16_t*>(vector_row.data_ptr<at::BFloat16>()), 1, 224, 80};
  Bf16TileRowsOfGroups(op, 0, 2);
  EXPECT_TRUE(at::equal(Bf16TileLinear(row, tiles, bias), vector_row));
}

TEST(Bf16Tiles, ARowIsTheSameAloneAndInAnyCallUpToTheVectorRows) {
  SKIP_WITHOUT_AMX();
  // 224 inputs: a visit of 4 k-blocks and a tail of 3; 5 stripes (a group and a tail stripe).
  const at::Tensor w = RandomBf16({80, 224}, 3);
  const at::Tensor tiles = PackBf16Tiles(w);
  const at::Tensor bias = RandomBf16({80}, 4);
  const at::Tensor x = RandomBf16({kMostTileVectorRows, 224}, 5);
  const at::Tensor together = Bf16TileLinear(x, tiles, bias);
  for (int64_t rows = 1; rows <= kMostTileVectorRows; ++rows) {
    for (int64_t r = 0; r < kMostTileVectorRows; ++r) {
      // Row r last in a call of `rows` rows.
      const at::Tensor call = at::cat({x.narrow(0, 0, rows - 1), x.narrow(0, r, 1)});
      EXPECT_TRUE(at::equal(Bf16TileLinear(call, tiles, bias)[rows - 1], together[r]))
          << "row " << r << " in a call of " << rows;
    }
  }
}

TEST(Bf16Tiles, TheVectorKernelTakesMoreRowsThanAVisitAsEachAlone) {
  SKIP_WITHOUT_AMX();
  ASSERT_TRUE(Bf16TileRowsRun()) << "an AMX CPU without AVX512-BF16";
  // 9 rows: two runs of 4 and one of 1; 80 outputs: a group and a tail stripe.
  const at::Tensor tiles = PackBf16Tiles(RandomBf16({80, 224}, 7));
  const at::Tensor bias32 = RandomBf16({80}, 8).to(at::kFloat);
  const at::Tensor x = RandomBf16({9, 224}, 9);
  at::Tensor y = at::full({9, 80}, 7.0, x.options());
  const Bf16TileRowsOperands op{
      reinterpret_cast<const uint16_t*>(x.data_ptr<at::BFloat16>()),
      reinterpret_cast<const uint16_t*>(tiles.data_ptr<at::BFloat16>()), bias32.data_ptr<float>(),
      reinterpret_cast<uint16_t*>(y.data_ptr<at::BFloat16>()), 9, 224, 80};
  Bf16TileRowsOfGroups(op, 0, 2);
  for (int64_t r = 0; r < 9; ++r) {
    const at::Tensor row = x.narrow(0, r, 1).contiguous();
    at::Tensor alone = at::empty({1, 80}, x.options());
    Bf16TileRowsOperands one = op;
    one.x = reinterpret_cast<const uint16_t*>(row.data_ptr<at::BFloat16>());
    one.y = reinterpret_cast<uint16_t*>(alone.data_ptr<at::BFloat16>());
    one.rows = 1;
    Bf16TileRowsOfGroups(one, 0, 2);
    EXPECT_TRUE(at::equal(y[r], alone[0])) << "row " << r;
  }
}

TEST(Bf16Tiles, OperandsTheKernelCannotTakeAreRefusedNamingThem) {
  SKIP_WITHOUT_AMX();
  bf16_layout_checks::ExpectOperandsRefused(&Bf16TileLinear, PackBf16Tiles(RandomBf16({32, 64}, 6)), "not in tile order");
}

class ServedBf16Tiles : public ServedBf16Model {
 protected:
  ServedBf16Tiles() : ServedBf16Model("tiles", 31) {}
};

TEST_F(ServedBf16Tiles, LayersInHostMemoryArePackedOnTheirFirstCallOnly) {
  // Without AMX no weight is in tile order.
  const auto packed = PackedSlotsOfAMixedMap(&IsBf16TileWeight);
  const bool amx = Bf16TilesRun();
  EXPECT_EQ(packed.at("model.layers.0"), amx ? LayerZeroLinears() : std::vector<std::string>{});
  EXPECT_TRUE(packed.at("model.layers.1").empty()) << "disk blocks stay in the mapped file";
  EXPECT_TRUE(packed.at("model.layers.2").empty()) << "a (virtual) GPU has no AMX";
  EXPECT_EQ(packed.at("lm_head"),
            amx ? std::vector<std::string>{"lm_head.weight"} : std::vector<std::string>{});
  EXPECT_TRUE(packed.at("model.embed_tokens").empty());
}

TEST_F(ServedBf16Tiles, PackingLeavesTheLogitsOfTheFirstCallAndLaterOnesAlike) {
  // (Without AMX: the same promise of the kernels that do run.) A decode step follows the
  // vector kernels on the bound weights to BF16 precision (usually equal bits: the float32
  // sums differ in their last bits at most, which the BF16 rounding of each output rarely shows).
  EXPECT_LT(RepackedAgainstBoundWeights({201}), 0.05)
      << "the tile kernels drift from the vector kernels' logits";
}

}  // namespace
}  // namespace placer::model
