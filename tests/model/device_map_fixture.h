// The fixture of the device-map tests (device_map_test.cc, device_map_staging_test.cc): one
// checkpoint per architecture, its single-device logits, and loading it under any map.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "runtime/block_runner.h"

namespace placer::model::device_map_test {

namespace fs = std::filesystem;
using placement::Device;
using runtime::MemoryKind;
using runtime::RuntimePlan;
using DeviceMap = std::vector<std::pair<std::string, Device>>;

inline constexpr int kLayers = 4;
inline const Device kCpu = Device::Cpu();
inline const Device kDisk = Device::Disk();
inline Device Gpu(int index) { return Device::Cuda(index); }

struct Architecture {
  std::string name, writer_args, embed, layer_prefix, final_norm, lm_head;
  std::vector<std::string> extra_embed;  // gpt2's position embedding
  bool tied_head = false;  // the lm_head reads the embedding: the plan keeps it with it
};

inline const Architecture kLlama{"llama",
                          "--arch llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 "
                          "--intermediate 96 --vocab 300 --seed 11",
                          "model.embed_tokens", "model.layers.", "model.norm", "lm_head", {}};
inline const Architecture kGpt2{"gpt2", "--arch gpt2 --layers 4 --hidden 64 --heads 4 --vocab 300 --seed 12",
                         "transformer.wte", "transformer.h.", "transformer.ln_f", "lm_head",
                         {"transformer.wpe"}, /*tied_head=*/true};
// Every optional tensor present: q/k/v/o and MLP biases, an untied GPT-2 head.
inline const Architecture kLlamaBiases{"llama_biases",
                                "--arch llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 "
                                "--intermediate 96 --vocab 300 --attention-bias --mlp-bias "
                                "--seed 13",
                                "model.embed_tokens", "model.layers.", "model.norm", "lm_head", {}};
inline const Architecture kGpt2Untied{"gpt2_untied_head",
                               "--arch gpt2 --layers 4 --hidden 64 --heads 4 --vocab 300 "
                               "--tie-word-embeddings false --seed 14",
                               "transformer.wte", "transformer.h.", "transformer.ln_f", "lm_head",
                               {"transformer.wpe"}};

// Module -> device with layer i on layer_devices[i]; embedding on `first`, the head on `last`.
inline DeviceMap MapOf(const Architecture& arch, Device first, std::vector<Device> layer_devices,
                Device last) {
  DeviceMap map{{arch.embed, first}};
  for (const std::string& extra : arch.extra_embed) map.emplace_back(extra, first);
  for (int i = 0; i < kLayers; ++i) map.emplace_back(arch.layer_prefix + std::to_string(i), layer_devices[i]);
  map.emplace_back(arch.final_norm, last);
  if (!arch.tied_head) map.emplace_back(arch.lm_head, last);
  return map;
}

struct Loaded {
  std::unique_ptr<CausalLm> model;
  std::shared_ptr<runtime::RuntimeAccounting> accounting;
};

class DeviceMaps : public ::testing::TestWithParam<Architecture> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("placer-device-map-", getpid(), "-", GetParam().name);
    fs::remove_all(dir_);
    ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", dir_.string(),
                                       " ", GetParam().writer_args, " > /dev/null")
                              .c_str()),
              0);
    auto checkpoint = loader::Checkpoint::Open(dir_.string());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = *checkpoint;
    Loaded baseline = Load(RuntimePlan::AllOnCpu());
    ASSERT_NE(baseline.model, nullptr);
    auto logits = baseline.model->Forward(prompt_, /*all_positions=*/true);
    ASSERT_TRUE(logits.ok()) << logits.status();
    expected_ = *std::move(logits);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Loaded Load(RuntimePlan plan) {
    plan.virtual_gpus = true;
    if (plan.offload_dir.empty()) plan.offload_dir = (dir_ / "offload").string();
    ModelRuntime runtime{plan, std::make_shared<runtime::RuntimeAccounting>(
                                   std::vector<std::string>{"cuda:0", "cuda:1", "cpu", "disk"})};
    auto model = LoadCausalLm(checkpoint_, runtime);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return {};
    return {*std::move(model), runtime.accounting};
  }

  static RuntimePlan PlanOf(DeviceMap map, Device execution, bool prefetch = true) {
    RuntimePlan plan;
    plan.device_map = std::move(map);
    plan.execution_device = execution;
    plan.prefetch = prefetch;
    return plan;
  }

  void ExpectSameLogits(const Logits& actual, const std::string& what) {
    ASSERT_EQ(actual.shape, expected_.shape) << what;
    for (size_t i = 0; i < actual.values.size(); ++i) {
      const float want = expected_.values[i];
      ASSERT_NEAR(actual.values[i], want, 1e-5f * std::max(1.0f, std::abs(want)))
          << what << ": logit " << i;
    }
  }

  void ExpectSameAnswer(RuntimePlan plan, const std::string& what) {
    Loaded loaded = Load(std::move(plan));
    ASSERT_NE(loaded.model, nullptr) << what;
    // Twice: the second pass uses the block prefetched at the end of the first.
    for (int pass = 0; pass < 2; ++pass) {
      auto logits = loaded.model->Forward(prompt_, /*all_positions=*/true);
      ASSERT_TRUE(logits.ok()) << what << ": " << logits.status();
      ExpectSameLogits(*logits, absl::StrCat(what, ", pass ", pass));
    }
  }

  const Architecture& arch() const { return GetParam(); }
  uint64_t BytesOf(const std::string& module) const {
    uint64_t bytes = 0;
    for (const auto& [name, info] : checkpoint_->tensors()) {
      if (name.rfind(module + ".", 0) == 0) bytes += static_cast<uint64_t>(info.num_elements) * 4;
    }
    return bytes;
  }

  fs::path dir_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_;
  std::vector<int32_t> prompt_{5, 17, 42, 99, 7, 250, 3};
  Logits expected_;
};

}  // namespace placer::model::device_map_test
