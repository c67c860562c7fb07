// A small BF16 Llama served in process, for the tests of the layouts BF16 weights are re-laid
// out into on a layer's first call (bf16_tiles_test.cc, bf16_pairs_test.cc): biases everywhere
// (attention and MLP), 96 MLP outputs, a vocabulary of 320 with an untied head, BF16 on disk so
// the CPU blocks bind zero-copy views of the mapped shard; loadable with any device map, on
// virtual GPUs and disk too.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "runtime/block_hook.h"
#include "tests/model/made_checkpoint.h"

namespace placer::model {

// The slots of each block whose weight `in_layout` accepts, as the block's calls see them (a
// hook after the default ones, so after any repacking).
class LayoutSeen final : public runtime::BlockHook {
 public:
  explicit LayoutSeen(bool (*in_layout)(const at::Tensor&)) : in_layout_(in_layout) {}
  void Enter(runtime::BlockCall& call) override {
    std::vector<std::string>& names = packed[call.bound->spec.module];
    names.clear();
    for (size_t i = 0; i < call.weights->size(); ++i) {
      if (in_layout_((*call.weights)[i])) names.push_back(call.bound->spec.tensors[i].name);
    }
  }
  std::map<std::string, std::vector<std::string>> packed;

 private:
  bool (*in_layout_)(const at::Tensor&);
};

class ServedBf16Model : public ::testing::Test {
 protected:
  // `name` keeps concurrent test binaries' checkpoints apart; `seed` picks the weights.
  ServedBf16Model(std::string name, int seed) : name_(std::move(name)), seed_(seed) {}

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("placer-", name_, "-", getpid());
    std::filesystem::remove_all(dir_);
    auto checkpoint = MakeAndOpenCheckpoint(
        dir_.string(), absl::StrCat("--arch llama --layers 3 --hidden 64 --heads 4 --kv-heads 2 "
                                    "--intermediate 96 --vocab 320 --seed ", seed_,
                                    " --attention-bias --mlp-bias --dtype BF16"));
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = *checkpoint;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

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

  // One Forward of the prompt with layer 0 on the CPU, layer 1 on disk (run from the mapped
  // file), layer 2 on a virtual GPU, the embedding and head on the CPU: the slots each block
  // held in the layout `in_layout` accepts.
  std::map<std::string, std::vector<std::string>> PackedSlotsOfAMixedMap(
      bool (*in_layout)(const at::Tensor&)) {
    runtime::RuntimePlan plan;
    plan.device_map = {{"", placement::Device::Cpu()},
                       {"model.layers.1", placement::Device::Disk()},
                       {"model.layers.2", placement::Device::Cuda(0)}};
    plan.execution_device = placement::Device::Cpu();
    auto hook = std::make_shared<LayoutSeen>(in_layout);
    std::unique_ptr<CausalLm> model = Load(plan, hook);
    EXPECT_NE(model, nullptr);
    if (model == nullptr) return {};
    EXPECT_TRUE(model->Forward(prompt_, true).ok());
    return hook->packed;
  }

  // Layer 0's linear weights, in the order its block lists them.
  static std::vector<std::string> LayerZeroLinears() {
    const std::string p = "model.layers.0.";
    return {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
            p + "self_attn.v_proj.weight", p + "self_attn.o_proj.weight",
            p + "mlp.gate_proj.weight",    p + "mlp.up_proj.weight",
            p + "mlp.down_proj.weight"};
  }

  // All on the CPU: the prompt's logits the same on the first call (which repacks each layer
  // on its way) and the second; then the decode steps' logits after `tokens`, relative to the
  // same model on a virtual GPU (the [out, in] vector kernels on the bound weights):
  // WorstOverScale of the two.
  double RepackedAgainstBoundWeights(const std::vector<int32_t>& tokens) {
    std::unique_ptr<CausalLm> model = Load(runtime::RuntimePlan::AllOnCpu());
    EXPECT_NE(model, nullptr);
    if (model == nullptr) return 1;
    auto first = model->Forward(prompt_, true);
    auto second = model->Forward(prompt_, true);
    EXPECT_TRUE(first.ok() && second.ok()) << first.status() << second.status();
    if (first.ok() && second.ok()) {
      EXPECT_EQ(first->values, second->values);
    }
    runtime::RuntimePlan gpu;
    gpu.device_map = {{"", placement::Device::Cuda(0)}};
    gpu.execution_device = placement::Device::Cuda(0);
    std::unique_ptr<CausalLm> vectors = Load(gpu);
    EXPECT_NE(vectors, nullptr);
    if (vectors == nullptr) return 1;
    const std::vector<float> got = DecodeSteps(*model, tokens), want = DecodeSteps(*vectors, tokens);
    EXPECT_EQ(got.size(), want.size());
    EXPECT_FALSE(got.empty());
    return got.empty() || got.size() != want.size() ? 1 : WorstOverScale(got, want);
  }

  // A prompt's rows, then `tokens` one at a time: every decode step's logits, concatenated.
  std::vector<float> DecodeSteps(CausalLm& lm, const std::vector<int32_t>& tokens) {
    auto sequence = lm.NewSequence(32);
    EXPECT_TRUE(sequence.ok()) << sequence.status();
    if (!sequence.ok()) return {};
    EXPECT_TRUE(lm.Extend(**sequence, prompt_).ok());
    std::vector<float> values;
    for (int32_t token : tokens) {
      auto step = lm.Extend(**sequence, {token});
      EXPECT_TRUE(step.ok()) << step.status();
      if (step.ok()) values.insert(values.end(), step->values.begin(), step->values.end());
    }
    return values;
  }

  // max |a - b| over max |b|: how far `got` is from `want`, relative to its largest logit.
  static double WorstOverScale(const std::vector<float>& got, const std::vector<float>& want) {
    double worst = 0, scale = 0;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
      worst = std::max(worst, std::abs(double(got[i]) - want[i]));
      scale = std::max(scale, std::abs(double(want[i])));
    }
    return scale > 0 ? worst / scale : worst;
  }

  const std::vector<int32_t> prompt_ = {3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 26, 43};
  std::filesystem::path dir_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_;

 private:
  std::string name_;
  int seed_;
};

}  // namespace placer::model
