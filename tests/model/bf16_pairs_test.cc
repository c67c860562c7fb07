// BF16 weights in pair order (model/bf16_pairs.h): the order itself, the products against a
// float64 sum of the same BF16 products (1 to 8 rows a pass and their tails, biases, the
// unpacked prompt-chunk path past kMostPairRows), each row bit-identical alone and batched, the
// one-loop product of several weights bit for bit the single ones, operands refused by name;
// and in a served model, the layers held in host memory packed on their first call (only those
// the hook promises) with logits unchanged by it and close to the [out, in] kernels'. The
// products run where the CPU has AVX512-BF16 (skipped elsewhere: the vector kernels' tests cover
// those CPUs); the order and the repacker's choice run on every CPU.
#include "model/bf16_pairs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/bf16_repacker.h"
#include "model/bf16_tiles.h"
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

#define SKIP_WITHOUT_AVX512_BF16()                                                          \
  if (!Bf16PairsRun()) GTEST_SKIP() << "this CPU (or PLACER_BF16_PAIRS=0) has no AVX512-BF16"

std::string ErrorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const c10::Error& e) {
    return std::string(e.what_without_backtrace());
  }
  return "no error";
}

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
    for (int64_t rows : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{8}, int64_t{9}, int64_t{23},
                         kMostPairRows, kMostPairRows + 3}) {
      for (int bias_kind = 0; bias_kind < 3; ++bias_kind) {
        SCOPED_TRACE(testing::Message() << "out " << out << " in " << in << " rows " << rows
                                        << " bias " << bias_kind);
        const at::Tensor x = RandomBf16({rows, in}, ++seed);
        at::Tensor bias;
        if (bias_kind == 1) bias = RandomBf16({out}, ++seed);
        if (bias_kind == 2) bias = at::randn({out});
        const at::Tensor y = Bf16PairLinear(x, pairs, bias);
        ASSERT_EQ(y.scalar_type(), at::kBFloat16);
        ASSERT_EQ(y.sizes(), (at::IntArrayRef{rows, out}));
        const at::Tensor x64 = x.to(at::kDouble), w64 = w.to(at::kDouble);
        at::Tensor reference = at::matmul(x64, w64.t());
        if (bias.defined()) reference = reference + bias.to(at::kDouble);
        const at::Tensor magnitude = at::matmul(x64.abs(), w64.abs().t());
        const at::Tensor error = (y.to(at::kDouble) - reference).abs();
        // One BF16 rounding of the result (and, past kMostPairRows, of a float32 bias), plus
        // float32 accumulation over `in` products.
        const at::Tensor allowed = reference.abs() * std::ldexp(1.0, -8) +
                                   (bias.defined() ? bias.to(at::kDouble).abs() * std::ldexp(1.0, -8) : at::zeros_like(reference)) +
                                   magnitude * 1e-6;
        ASSERT_TRUE(at::all(error <= allowed).item<bool>())
            << "worst error " << (error - allowed).max().item<double>() << " beyond";
      }
    }
  }
}

TEST(Bf16Pairs, ARowIsTheSameAloneAndInAnyBatchUpToThePairRows) {
  SKIP_WITHOUT_AVX512_BF16();
  // 40 rows: five passes of 8; 3 groups.
  const at::Tensor w = RandomBf16({96, 226}, 3);
  const at::Tensor pairs = PackBf16Pairs(w);
  const at::Tensor bias = RandomBf16({96}, 4);
  const at::Tensor x = RandomBf16({40, 226}, 5);
  const at::Tensor batched = Bf16PairLinear(x, pairs, bias);
  for (int64_t r = 0; r < 40; ++r) {
    EXPECT_TRUE(at::equal(Bf16PairLinear(x.narrow(0, r, 1), pairs, bias)[0], batched[r])) << r;
    const at::Tensor shifted = at::cat({x.narrow(0, (r + 7) % 37, 3), x.narrow(0, r, 1)});
    EXPECT_TRUE(at::equal(Bf16PairLinear(shifted, pairs, bias)[3], batched[r])) << r;
  }
  // The leading dimensions are kept: [2, 3, in] in, [2, 3, out] out.
  const at::Tensor three_d = Bf16PairLinear(x.narrow(0, 0, 6).view({2, 3, 226}), pairs, bias);
  EXPECT_EQ(three_d.sizes(), (at::IntArrayRef{2, 3, 96}));
  EXPECT_TRUE(at::equal(three_d.view({6, 96}), batched.narrow(0, 0, 6)));
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
  const at::Tensor pairs = PackBf16Pairs(RandomBf16({32, 64}, 6));
  EXPECT_NE(ErrorOf([&] { Bf16PairLinear(at::randn({2, 64}), pairs, {}); }).find("BF16 [..., 64]"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { Bf16PairLinear(RandomBf16({2, 32}, 7), pairs, {}); }).find("[..., 64]"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { Bf16PairLinear(RandomBf16({2, 64}, 7), RandomBf16({32, 64}, 8), {}); })
                .find("not in pair order"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { Bf16PairLinear(RandomBf16({2, 64}, 7), pairs, at::randn({31})); })
                .find("bias"),
            std::string::npos);
}

TEST(Bf16Pairs, TheRepackerTakesFittingOutInBf16LinearsWhereNoAmxRuns) {
  EXPECT_FALSE(Bf16PairRepacker(at::kFloat)) << "F32 compute keeps its weights";
  EXPECT_FALSE(Bf16WeightRepacker(at::kFloat));
  if (!Bf16PairsRun()) {
    EXPECT_FALSE(Bf16PairRepacker(at::kBFloat16)) << "no AVX512-BF16: BF16 weights stay as bound";
  }
  // The layout chosen for a BF16 model: AMX tiles first, then pairs, else none.
  const runtime::WeightRepacker chosen = Bf16WeightRepacker(at::kBFloat16);
  EXPECT_EQ(static_cast<bool>(chosen), Bf16TilesRun() || Bf16PairsRun());
  EXPECT_EQ(Bf16WeightLayoutNote().empty(), !(Bf16TilesRun() || Bf16PairsRun()));
  if (!Bf16PairsRun()) return;
  const runtime::WeightRepacker repack = Bf16PairRepacker(at::kBFloat16);
  ASSERT_TRUE(repack);
  runtime::BlockTensor linear{"model.layers.0.mlp.up_proj.weight"};
  linear.linear = loader::LinearWeight::kOutIn;
  runtime::BlockTensor conv1d{"transformer.h.0.mlp.c_fc.weight"};
  conv1d.linear = loader::LinearWeight::kInOut;
  runtime::BlockTensor head{"lm_head.weight"};
  head.lm_head = true;
  const runtime::BlockTensor norm{"model.layers.0.input_layernorm.weight"};
  const at::Tensor w = RandomBf16({32, 64}, 10);
  EXPECT_TRUE(IsBf16PairWeight(repack(linear, w)));
  EXPECT_TRUE(IsBf16PairWeight(repack(head, w)));
  EXPECT_FALSE(repack(conv1d, w).defined()) << "GPT-2's Conv1D weights are [in, out]";
  EXPECT_FALSE(repack(norm, RandomBf16({64}, 11)).defined());
  EXPECT_FALSE(repack(linear, RandomBf16({48, 64}, 12)).defined()) << "48 outputs: no groups";
  EXPECT_FALSE(repack(linear, RandomBf16({32, 63}, 12)).defined()) << "an odd input count";
  EXPECT_FALSE(repack(linear, w.to(at::kFloat)).defined());
}

// Served: what the layers compute with, seen from a hook after the default ones.
class PairWeightsSeen final : public runtime::BlockHook {
 public:
  void Enter(runtime::BlockCall& call) override {
    std::vector<std::string> packed;
    for (size_t i = 0; i < call.weights->size(); ++i) {
      if (IsBf16PairWeight((*call.weights)[i])) packed.push_back(call.bound->spec.tensors[i].name);
    }
    seen[call.bound->spec.module] = packed;
  }
  std::map<std::string, std::vector<std::string>> seen;
};

class ServedBf16Pairs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("placer-pairs-", getpid());
    fs::remove_all(dir_);
    // Biases everywhere (attention and MLP), 96 MLP outputs (3 groups), a vocabulary of 320
    // (10 groups) with an untied head; BF16 on disk, so the CPU blocks bind zero-copy views of
    // the mapped shard.
    auto checkpoint = MakeAndOpenCheckpoint(
        dir_.string(), "--arch llama --layers 3 --hidden 64 --heads 4 --kv-heads 2 "
                       "--intermediate 96 --vocab 320 --seed 37 --attention-bias --mlp-bias "
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

TEST_F(ServedBf16Pairs, LayersInHostMemoryArePackedOnTheirFirstCallOnly) {
  // Layer 0 on the CPU, layer 1 on disk (run from the mapped file), layer 2 on a virtual GPU;
  // the embedding and head on the CPU.
  runtime::RuntimePlan plan;
  plan.device_map = {{"", Device::Cpu()},
                     {"model.layers.1", Device::Disk()},
                     {"model.layers.2", Device::Cuda(0)}};
  plan.execution_device = Device::Cpu();
  auto hook = std::make_shared<PairWeightsSeen>();
  std::unique_ptr<CausalLm> model = Load(plan, hook);
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->Forward(prompt_, true).ok());
  const std::string p = "model.layers.0.";
  const bool pairs = Bf16PairsRun() && !Bf16TilesRun();
  EXPECT_EQ(hook->seen.at("model.layers.0"),
            pairs ? (std::vector<std::string>{p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                                              p + "self_attn.v_proj.weight", p + "self_attn.o_proj.weight",
                                              p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight",
                                              p + "mlp.down_proj.weight"})
                  : std::vector<std::string>{});
  EXPECT_TRUE(hook->seen.at("model.layers.1").empty()) << "disk blocks stay in the mapped file";
  EXPECT_TRUE(hook->seen.at("model.layers.2").empty()) << "a (virtual) GPU keeps its weights";
  EXPECT_EQ(hook->seen.at("lm_head"),
            pairs ? std::vector<std::string>{"lm_head.weight"} : std::vector<std::string>{});
  EXPECT_TRUE(hook->seen.at("model.embed_tokens").empty());
}

TEST_F(ServedBf16Pairs, PackingLeavesLogitsAloneAndCloseToTheBoundWeightsKernels) {
  std::unique_ptr<CausalLm> model = Load(runtime::RuntimePlan::AllOnCpu());
  ASSERT_NE(model, nullptr);
  auto first = model->Forward(prompt_, true);   // packs every layer on the way
  auto second = model->Forward(prompt_, true);  // runs on the packed weights
  ASSERT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
  EXPECT_EQ(first->values, second->values);
  // Decode steps (one row) against the same model on a virtual GPU (the [out, in] vector
  // kernels on the bound weights), to BF16 precision.
  runtime::RuntimePlan gpu;
  gpu.device_map = {{"", Device::Cuda(0)}};
  gpu.execution_device = Device::Cuda(0);
  std::unique_ptr<CausalLm> vectors = Load(gpu);
  ASSERT_NE(vectors, nullptr);
  const auto decode_steps = [&](CausalLm& lm) {
    auto sequence = lm.NewSequence(32);
    EXPECT_TRUE(sequence.ok()) << sequence.status();
    EXPECT_TRUE(lm.Extend(**sequence, prompt_).ok());
    std::vector<float> values;
    for (int32_t token : {201, 7, 88}) {
      auto step = lm.Extend(**sequence, {token});
      EXPECT_TRUE(step.ok()) << step.status();
      if (step.ok()) values.insert(values.end(), step->values.begin(), step->values.end());
    }
    return values;
  };
  const std::vector<float> packed = decode_steps(*model), reference = decode_steps(*vectors);
  ASSERT_EQ(packed.size(), reference.size());
  ASSERT_FALSE(packed.empty());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < packed.size(); ++i) {
    worst = std::max(worst, std::abs(double(packed[i]) - reference[i]));
    scale = std::max(scale, std::abs(double(reference[i])));
  }
  EXPECT_LT(worst, 0.05 * scale) << "the pair kernels drift from the vector kernels' logits";
}

}  // namespace
}  // namespace placer::model
