// BF16 weights in AMX tile order (model/bf16_tiles.h): the order itself, the products against a
// float64 sum of the same BF16 products (group tails, odd row counts, biases, the unpacked GEMM
// past kMostTileRows), each row bit-identical alone and batched, operands refused by name; and
// in a served model, the layers' weights packed on their first call (and only those the hook
// promises) with logits unchanged by it. The products run where the CPU has AMX (skipped
// elsewhere: the vector kernels' tests cover those CPUs); the order, the repacker's refusal and
// the served model's weights left as bound run on every CPU.
#include "model/bf16_tiles.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "runtime/block_hook.h"
#include "tests/model/made_checkpoint.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using placement::Device;

at::Tensor RandomBf16(std::vector<int64_t> shape, int seed) {
  at::manual_seed(seed);
  return at::randn(shape, at::TensorOptions().dtype(at::kFloat)).to(at::kBFloat16);
}

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
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{17}, int64_t{40}, kMostTileRows, kMostTileRows + 5}) {
      for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {
        SCOPED_TRACE(testing::Message() << "out " << out << " in " << in << " rows " << rows
                                        << " bias " << bias_kind);
        const at::Tensor x = RandomBf16({rows, in}, ++seed);
        at::Tensor bias;
        if (bias_kind == 1) bias = RandomBf16({out}, ++seed);
        if (bias_kind == 2) bias = at::randn({out});
        const at::Tensor y = Bf16TileLinear(x, tiles, bias);
        ASSERT_EQ(y.scalar_type(), at::kBFloat16);
        ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, out}));
        const at::Tensor x64 = x.to(at::kDouble), w64 = w.to(at::kDouble);
        at::Tensor reference = at::matmul(x64, w64.t());
        // The unpacked GEMM adds a BF16 bias (ATen's linear): the reference rounds it the same.
        if (bias.defined()) {
          reference = reference + (rows > kMostTileRows ? bias.to(at::kBFloat16) : bias).to(at::kDouble);
        }
        const at::Tensor magnitude = at::matmul(x64.abs(), w64.abs().t());
        const at::Tensor error = (y.to(at::kDouble) - reference).abs();
        // One BF16 rounding of the result, plus float32 accumulation over `in` products.
        const at::Tensor allowed = reference.abs() * std::ldexp(1.0, -8) + magnitude * 1e-6;
        ASSERT_TRUE(at::all(error <= allowed).item<bool>())
            << "worst error " << (error - allowed).max().item<double>() << " beyond";
      }
    }
  }
}

TEST(Bf16Tiles, ARowIsTheSameAloneAndInAnyBatchUpToTheTileRows) {
  SKIP_WITHOUT_AMX();
  // 40 rows: two full B tiles and a tail of 8; 5 stripes (a group and a tail stripe).
  const at::Tensor w = RandomBf16({80, 224}, 3);
  const at::Tensor tiles = PackBf16Tiles(w);
  const at::Tensor bias = RandomBf16({80}, 4);
  const at::Tensor x = RandomBf16({40, 224}, 5);
  const at::Tensor batched = Bf16TileLinear(x, tiles, bias);
  for (int64_t r = 0; r < 40; ++r) {
    EXPECT_TRUE(at::equal(Bf16TileLinear(x.narrow(0, r, 1), tiles, bias)[0], batched[r])) << r;
    const at::Tensor shifted = at::cat({x.narrow(0, (r + 7) % 40, 1), x.narrow(0, r, 1)});
    EXPECT_TRUE(at::equal(Bf16TileLinear(shifted, tiles, bias)[1], batched[r])) << r;
  }
  // The leading dimensions are kept: [2, 3, in] in, [2, 3, out] out.
  const at::Tensor three_d = Bf16TileLinear(x.narrow(0, 0, 6).view({2, 3, 224}), tiles, bias);
  EXPECT_EQ(three_d.sizes(), (at::IntArrayRef{2, 3, 80}));
  EXPECT_TRUE(at::equal(three_d.view({6, 80}), batched.narrow(0, 0, 6)));
}

TEST(Bf16Tiles, OperandsTheKernelCannotTakeAreRefusedNamingThem) {
  SKIP_WITHOUT_AMX();
  const at::Tensor tiles = PackBf16Tiles(RandomBf16({32, 64}, 6));
  const auto message = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { Bf16TileLinear(at::randn({2, 64}), tiles, {}); }).find("BF16 [..., 64]"),
            std::string::npos);
  EXPECT_NE(message([&] { Bf16TileLinear(RandomBf16({2, 32}, 7), tiles, {}); }).find("[..., 64]"),
            std::string::npos);
  EXPECT_NE(message([&] { Bf16TileLinear(RandomBf16({2, 64}, 7), RandomBf16({32, 64}, 8), {}); })
                .find("not in tile order"),
            std::string::npos);
  EXPECT_NE(message([&] { Bf16TileLinear(RandomBf16({2, 64}, 7), tiles, at::randn({31})); })
                .find("bias"),
            std::string::npos);
}

TEST(Bf16Tiles, TheRepackerTakesFittingOutInBf16LinearsOnly) {
  EXPECT_FALSE(Bf16TileRepacker(at::kFloat)) << "F32 compute keeps its weights";
  if (!Bf16TilesRun()) {
    EXPECT_FALSE(Bf16TileRepacker(at::kBFloat16)) << "no AMX: BF16 weights stay as bound";
    return;
  }
  const runtime::WeightRepacker repack = Bf16TileRepacker(at::kBFloat16);
  ASSERT_TRUE(repack);
  runtime::BlockTensor linear{"model.layers.0.mlp.up_proj.weight"};
  linear.linear = loader::LinearWeight::kOutIn;
  runtime::BlockTensor conv1d{"transformer.h.0.mlp.c_fc.weight"};
  conv1d.linear = loader::LinearWeight::kInOut;
  runtime::BlockTensor head{"lm_head.weight"};
  head.lm_head = true;
  const runtime::BlockTensor norm{"model.layers.0.input_layernorm.weight"};
  const at::Tensor w = RandomBf16({32, 64}, 10);
  EXPECT_TRUE(IsBf16TileWeight(repack(linear, w)));
  EXPECT_TRUE(IsBf16TileWeight(repack(head, w)));
  EXPECT_FALSE(repack(conv1d, w).defined()) << "GPT-2's Conv1D weights are [in, out]";
  EXPECT_FALSE(repack(norm, RandomBf16({64}, 11)).defined());
  EXPECT_FALSE(repack(linear, RandomBf16({20, 64}, 12)).defined()) << "20 outputs: no stripes";
  EXPECT_FALSE(repack(linear, w.to(at::kFloat)).defined());
}

// Served: what the layers compute with, seen from a hook after the default ones.
class WeightsSeen final : public runtime::BlockHook {
 public:
  void Enter(runtime::BlockCall& call) override {
    std::vector<bool> tiles;
    for (const at::Tensor& w : *call.weights) tiles.push_back(IsBf16TileWeight(w));
    seen[call.bound->spec.module] = tiles;
    slot_names[call.bound->spec.module].clear();
    for (const auto& slot : call.bound->spec.tensors) slot_names[call.bound->spec.module].push_back(slot.name);
  }
  std::map<std::string, std::vector<bool>> seen;
  std::map<std::string, std::vector<std::string>> slot_names;
};

class ServedBf16Tiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("placer-tiles-", getpid());
    fs::remove_all(dir_);
    // Biases everywhere (attention and MLP), 96 MLP outputs (a group of 4 stripes and a tail
    // of 2), a vocabulary of 320 (20 stripes) with an untied head; BF16 on disk, so the CPU
    // blocks bind zero-copy views of the mapped shard.
    auto checkpoint = MakeAndOpenCheckpoint(
        dir_.string(), "--arch llama --layers 3 --hidden 64 --heads 4 --kv-heads 2 "
                       "--intermediate 96 --vocab 320 --seed 31 --attention-bias --mlp-bias "
                       "--dtype BF16");
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = *checkpoint;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<CausalLm> Load(runtime::RuntimePlan plan,
                                 std::shared_ptr<runtime::BlockHook> hook = nullptr) {
    plan.virtual_gpus = true;
    plan.offload_dir = (dir_ / "offload").string();
    ModelRuntime runtime{plan, std::make_shared<runtime::RuntimeAccounting>(
                                   std::vector<std::string>{"cuda:0", "cpu", "disk"})};
    runtime.max_sequence_length = 64;
    runtime.kv_cache_blocks = 8;
    runtime.compute_dtype = loader::DType::kBF16;
    if (hook != nullptr) runtime.extra_hooks.push_back(hook);
    auto model = LoadCausalLm(checkpoint_, runtime);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }

  const std::vector<int32_t> prompt_ = {3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 26, 43};
  fs::path dir_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_;
};

TEST_F(ServedBf16Tiles, LayersInHostMemoryArePackedOnTheirFirstCallOnly) {
  // Layer 0 on the CPU, layer 1 on disk (run from the mapped file), layer 2 on a virtual GPU;
  // the embedding and head on the CPU. Without AMX no weight is packed.
  runtime::RuntimePlan plan;
  plan.device_map = {{"", Device::Cpu()},
                     {"model.layers.1", Device::Disk()},
                     {"model.layers.2", Device::Cuda(0)}};
  plan.execution_device = Device::Cpu();
  auto hook = std::make_shared<WeightsSeen>();
  std::unique_ptr<CausalLm> model = Load(plan, hook);
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->Forward(prompt_, true).ok());
  const auto slots_packed = [&](const std::string& module) {
    std::vector<std::string> packed;
    const auto& tiles = hook->seen.at(module);
    for (size_t i = 0; i < tiles.size(); ++i) {
      if (tiles[i]) packed.push_back(hook->slot_names.at(module)[i]);
    }
    return packed;
  };
  const std::string p = "model.layers.0.";
  const bool amx = Bf16TilesRun();
  EXPECT_EQ(slots_packed("model.layers.0"),
            amx ? (std::vector<std::string>{p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                                            p + "self_attn.v_proj.weight", p + "self_attn.o_proj.weight",
                                            p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight",
                                            p + "mlp.down_proj.weight"})
                : std::vector<std::string>{});
  EXPECT_TRUE(slots_packed("model.layers.1").empty()) << "disk blocks stay in the mapped file";
  EXPECT_TRUE(slots_packed("model.layers.2").empty()) << "a (virtual) GPU has no AMX";
  EXPECT_EQ(slots_packed("lm_head"),
            amx ? std::vector<std::string>{"lm_head.weight"} : std::vector<std::string>{});
  EXPECT_TRUE(slots_packed("model.embed_tokens").empty());
}

TEST_F(ServedBf16Tiles, PackingLeavesTheLogitsOfTheFirstCallAndLaterOnesAlike) {
  // (Without AMX: the same promise of the vector kernels on the bound weights.)
  std::unique_ptr<CausalLm> model = Load(runtime::RuntimePlan::AllOnCpu());
  ASSERT_NE(model, nullptr);
  auto first = model->Forward(prompt_, true);   // packs every layer on the way
  auto second = model->Forward(prompt_, true);  // runs on the packed weights
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  EXPECT_EQ(first->values, second->values);
  // A decode step (one row) follows the same model on a virtual GPU (the vector kernels on
  // the bound weights) to BF16 precision.
  runtime::RuntimePlan gpu;
  gpu.device_map = {{"", Device::Cuda(0)}};
  gpu.execution_device = Device::Cuda(0);
  std::unique_ptr<CausalLm> vectors = Load(gpu);
  ASSERT_NE(vectors, nullptr);
  const auto decode_step = [&](CausalLm& lm) {
    auto sequence = lm.NewSequence(32);
    EXPECT_TRUE(sequence.ok()) << sequence.status();
    EXPECT_TRUE(lm.Extend(**sequence, prompt_).ok());
    auto step = lm.Extend(**sequence, {201});
    EXPECT_TRUE(step.ok()) << step.status();
    return step.ok() ? step->values : std::vector<float>();
  };
  const std::vector<float> tiles = decode_step(*model), reference = decode_step(*vectors);
  ASSERT_EQ(tiles.size(), reference.size());
  ASSERT_FALSE(tiles.empty());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < tiles.size(); ++i) {
    worst = std::max(worst, std::abs(double(tiles[i]) - reference[i]));
    scale = std::max(scale, std::abs(double(reference[i])));
  }
  // (Usually equal bits: the float32 sums differ in their last bits at most, which the BF16
  // rounding of each product's output rarely shows.)
  EXPECT_LT(worst, 0.05 * scale) << "the tile kernels drift from the vector kernels' logits";
}

}  // namespace
}  // namespace placer::model
