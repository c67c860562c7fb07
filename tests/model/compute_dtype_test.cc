// BF16 compute: weights converted once at load, activations and the KV cache in BF16, norms
// and softmax in F32. The logits follow the F32 model's to BF16 precision, the bytes held are
// halved, a spread map gives the single-device BF16 answer, and F16 without a GPU is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "tests/model/made_checkpoint.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using loader::DType;
using placement::Device;
using runtime::MemoryKind;
using runtime::RuntimePlan;

struct Architecture {
  std::string name, writer_args, layer_prefix;
};
void PrintTo(const Architecture& architecture, std::ostream* out) { *out << architecture.name; }

class ComputeDtype : public ::testing::TestWithParam<Architecture> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("placer-dtype-", getpid(), "-", GetParam().name);
    fs::remove_all(dir_);
    auto checkpoint = MakeAndOpenCheckpoint(dir_.string(), GetParam().writer_args);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = *checkpoint;
  }
  void TearDown() override { fs::remove_all(dir_); }

  struct Loaded {
    std::unique_ptr<CausalLm> model;
    std::shared_ptr<runtime::RuntimeAccounting> accounting;
  };
  Loaded Load(DType dtype, RuntimePlan plan = RuntimePlan::AllOnCpu()) {
    plan.virtual_gpus = true;
    plan.offload_dir = (dir_ / "offload").string();
    ModelRuntime runtime{plan, std::make_shared<runtime::RuntimeAccounting>(
                                   std::vector<std::string>{"cuda:0", "cuda:1", "cpu", "disk"})};
    runtime.max_sequence_length = 64;
    runtime.kv_cache_blocks = 8;
    runtime.compute_dtype = dtype;
    auto model = LoadCausalLm(checkpoint_, runtime);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return {};
    return {*std::move(model), runtime.accounting};
  }

  const std::vector<int32_t> prompt_ = {3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 26, 43};
  fs::path dir_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_;
};

TEST_P(ComputeDtype, Bf16LogitsFollowF32AndHoldHalfTheBytes) {
  Loaded f32 = Load(DType::kF32);
  Loaded bf16 = Load(DType::kBF16);
  ASSERT_NE(f32.model, nullptr);
  ASSERT_NE(bf16.model, nullptr);
  auto want = f32.model->Forward(prompt_, /*all_positions=*/true);
  auto got = bf16.model->Forward(prompt_, /*all_positions=*/true);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
  ASSERT_EQ(got->shape, want->shape);
  const int64_t vocab = want->shape[1];
  double worst = 0;
  for (int64_t row = 0; row < want->shape[0]; ++row) {
    double scale = 0, error = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double w = want->values[row * vocab + v], g = got->values[row * vocab + v];
      scale = std::max(scale, std::abs(w));
      error = std::max(error, std::abs(w - g));
    }
    worst = std::max(worst, error / scale);
  }
  // BF16 keeps 8 significant bits (0.4%); a few layers of rounding stay within a few percent,
  // while computing in the wrong dtype or dropping a conversion gives errors of order 1.
  EXPECT_LT(worst, 0.05) << "largest error relative to the row's largest logit";
  EXPECT_GT(worst, 1e-5) << "BF16 should not be bit-identical to F32: was it computed in F32?";

  const auto weights = [](const Loaded& loaded) {
    return loaded.accounting->Used("cpu", MemoryKind::kWeights);
  };
  EXPECT_EQ(weights(bf16) * 2, weights(f32));
  EXPECT_EQ(bf16.accounting->Used("cpu", MemoryKind::kKvCache) * 2,
            f32.accounting->Used("cpu", MemoryKind::kKvCache));

  // Decoding token by token in BF16 stays with the full BF16 forward pass.
  auto sequence = bf16.model->NewSequence(static_cast<int64_t>(prompt_.size()));
  ASSERT_TRUE(sequence.ok()) << sequence.status();
  for (size_t i = 0; i < prompt_.size(); ++i) {
    auto step = bf16.model->Extend(**sequence, {prompt_[i]});
    ASSERT_TRUE(step.ok()) << step.status();
    double scale = 0, error = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double w = got->values[i * vocab + v];
      scale = std::max(scale, std::abs(w));
      error = std::max(error, std::abs(w - step->values[v]));
    }
    EXPECT_LT(error / scale, 0.05) << "position " << i;
  }
}

// Decode rows of a BF16 model read the BF16 KV cache in the decode-attention kernel and go
// through the few-row BF16 products: a row's logits are the same bits alone and batched.
TEST_P(ComputeDtype, Bf16DecodeRowsAreTheSameBitsAloneAndBatched) {
  Loaded bf16 = Load(DType::kBF16);
  ASSERT_NE(bf16.model, nullptr);
  const std::vector<std::vector<int32_t>> prompts = {{3, 141, 59, 26, 53}, {97, 93, 238}, {46}};
  auto prefilled = [&](const std::vector<int32_t>& prompt) {
    auto sequence = bf16.model->NewSequence(16);  // one KV block: six fit the 8 of Load
    EXPECT_TRUE(sequence.ok()) << sequence.status();
    EXPECT_TRUE(bf16.model->Extend(**sequence, prompt).ok());
    return *std::move(sequence);
  };
  std::vector<std::unique_ptr<SequenceCache>> alone, batched;
  for (const auto& prompt : prompts) {
    alone.push_back(prefilled(prompt));
    batched.push_back(prefilled(prompt));
  }
  const int64_t vocab = bf16.model->vocab_size();
  for (int32_t token : {7, 201, 12}) {  // three decode steps, each of every sequence
    std::vector<CausalLm::SequenceStep> steps;
    for (auto& sequence : batched) steps.push_back({sequence.get(), {token}});
    auto together = bf16.model->ExtendBatch(steps);
    ASSERT_TRUE(together.ok()) << together.status();
    for (size_t i = 0; i < alone.size(); ++i) {
      auto one = bf16.model->Extend(*alone[i], {token});
      ASSERT_TRUE(one.ok()) << one.status();
      const std::vector<float> row(together->values.begin() + static_cast<int64_t>(i) * vocab,
                                   together->values.begin() + static_cast<int64_t>(i + 1) * vocab);
      EXPECT_EQ(row, one->values) << "sequence " << i << ", token " << token;
    }
  }
}

TEST_P(ComputeDtype, Bf16OnASpreadMapGivesTheSingleDeviceAnswer) {
  // The single device is a virtual GPU, as the spread map's execution device: layers held and
  // run in host memory may take other kernels (AMX tiles: model/bf16_tiles.h).
  RuntimePlan gpu;
  gpu.device_map = {{"", Device::Cuda(0)}};
  gpu.execution_device = Device::Cuda(0);
  Loaded single = Load(DType::kBF16, gpu);
  RuntimePlan plan;
  const std::string layer = GetParam().layer_prefix;
  // Layers over two virtual GPUs, the CPU (staged) and disk (converted through the offload
  // store, since the checkpoint is F32); everything else on cuda:0.
  plan.device_map = {{"", Device::Cuda(0)},
                     {layer + "0", Device::Cuda(1)},
                     {layer + "1", Device::Cpu()},
                     {layer + "2", Device::Disk()}};
  plan.execution_device = Device::Cuda(0);
  Loaded spread = Load(DType::kBF16, plan);
  ASSERT_NE(single.model, nullptr);
  ASSERT_NE(spread.model, nullptr);
  auto want = single.model->Forward(prompt_, true);
  auto got = spread.model->Forward(prompt_, true);
  ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
  EXPECT_EQ(got->values, want->values) << "the same BF16 kernels on the same values";
}

TEST_P(ComputeDtype, F16WithoutAGpuIsRefusedSayingWhy) {
  ModelRuntime runtime;
  runtime.compute_dtype = DType::kF16;
  auto model = LoadCausalLm(checkpoint_, runtime);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("F16 needs a real GPU"), std::string::npos)
      << model.status();
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, ComputeDtype,
    ::testing::Values(Architecture{"llama", "--arch llama --layers 3 --hidden 64 --heads 4 "
                                            "--kv-heads 2 --intermediate 96 --vocab 300 --seed 8",
                                   "model.layers."},
                      Architecture{"gpt2", "--arch gpt2 --layers 3 --hidden 64 --heads 4 "
                                           "--vocab 300 --seed 9",
                                   "transformer.h."}),
    [](const ::testing::TestParamInfo<Architecture>& info) { return info.param.name; });

}  // namespace
}  // namespace placer::model
