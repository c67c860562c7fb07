// Which weights a BF16 model's layers re-lay out (model/bf16_repacker.h): the layout chosen for
// the CPU (AMX tiles, else pairs, else none), and for each layout this CPU runs, the [out, in]
// BF16 linears of fitting shape only; F32 compute keeps every weight as bound.
#include "model/bf16_repacker.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "model/bf16_pairs.h"
#include "model/bf16_tiles.h"
#include "tests/model/bf16_layout_checks.h"

namespace placer::model {
namespace {

using bf16_layout_checks::RandomBf16;

TEST(Bf16Repacker, AmxTilesFirstThenPairsElseNone) {
  EXPECT_FALSE(Bf16WeightRepacker(at::kFloat)) << "F32 compute keeps its weights";
  EXPECT_FALSE(Bf16TileRepacker(at::kFloat));
  EXPECT_FALSE(Bf16PairRepacker(at::kFloat));
  EXPECT_EQ(static_cast<bool>(Bf16TileRepacker(at::kBFloat16)), Bf16TilesRun());
  EXPECT_EQ(static_cast<bool>(Bf16PairRepacker(at::kBFloat16)), Bf16PairsRun());
  const bool any = Bf16TilesRun() || Bf16PairsRun();
  EXPECT_EQ(static_cast<bool>(Bf16WeightRepacker(at::kBFloat16)), any);
  EXPECT_EQ(Bf16WeightLayoutNote().empty(), !any);
  if (!any) return;
  // The chosen one packs into the tiles where AMX runs.
  runtime::BlockTensor linear{"model.layers.0.mlp.up_proj.weight"};
  linear.linear = loader::LinearWeight::kOutIn;
  const at::Tensor packed = Bf16WeightRepacker(at::kBFloat16)(linear, RandomBf16({32, 64}, 1));
  EXPECT_EQ(IsBf16TileWeight(packed), Bf16TilesRun());
  EXPECT_EQ(IsBf16PairWeight(packed), !Bf16TilesRun());
}

struct Layout {
  const char* name;
  bool runs;
  runtime::WeightRepacker repacker;
  bool (*in_layout)(const at::Tensor&);
  std::vector<std::vector<int64_t>> misfits;  // BF16 [out, in] shapes the layout cannot take
};

TEST(Bf16Repacker, EachLayoutTakesFittingOutInBf16LinearsOnly) {
  const std::vector<Layout> layouts = {
      {"tiles", Bf16TilesRun(), Bf16TileRepacker(at::kBFloat16), &IsBf16TileWeight,
       {{20, 64}, {32, 48}}},  // 20 outputs: no stripes of 16; 48 inputs: no blocks of 32
      {"pairs", Bf16PairsRun(), Bf16PairRepacker(at::kBFloat16), &IsBf16PairWeight,
       {{48, 64}, {32, 63}}}};  // 48 outputs: no groups of 32; an odd input count
  runtime::BlockTensor linear{"model.layers.0.mlp.up_proj.weight"};
  linear.linear = loader::LinearWeight::kOutIn;
  runtime::BlockTensor conv1d{"transformer.h.0.mlp.c_fc.weight"};
  conv1d.linear = loader::LinearWeight::kInOut;
  runtime::BlockTensor head{"lm_head.weight"};
  head.lm_head = true;
  const runtime::BlockTensor norm{"model.layers.0.input_layernorm.weight"};
  const at::Tensor w = RandomBf16({32, 64}, 10);
  for (const Layout& layout : layouts) {
    SCOPED_TRACE(layout.name);
    if (!layout.runs) continue;
    const runtime::WeightRepacker& repack = layout.repacker;
    ASSERT_TRUE(repack);
    const at::Tensor packed = repack(linear, w);
    EXPECT_TRUE(layout.in_layout(packed));
    EXPECT_TRUE(layout.in_layout(repack(head, w)));
    EXPECT_FALSE(repack(conv1d, w).defined()) << "GPT-2's Conv1D weights are [in, out]";
    EXPECT_FALSE(repack(norm, RandomBf16({64}, 11)).defined());
    for (const std::vector<int64_t>& shape : layout.misfits) {
      EXPECT_FALSE(repack(linear, RandomBf16(shape, 12)).defined()) << shape[0] << " x " << shape[1];
    }
    EXPECT_FALSE(repack(linear, w.to(at::kFloat)).defined()) << "F32 weights";
    EXPECT_FALSE(repack(linear, w.t()).defined()) << "a transposed (non-contiguous) view";
  }
}

}  // namespace
}  // namespace placer::model
