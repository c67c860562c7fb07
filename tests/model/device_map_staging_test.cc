// Device maps that stage blocks (device_map_fixture.h, the Llama checkpoint): the transfer and
// memory counters equal what the map predicts, an offloaded embedding is looked up where it
// lives, the next offloaded block is prefetched, two staging slots are reused on every pass,
// converted disk tensors come from the offload store.
#include <gtest/gtest.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "tests/model/device_map_fixture.h"

namespace placer::model {
namespace {

using namespace device_map_test;  // NOLINT: the fixture, its architectures and maps

// The byte arithmetic needs one architecture only.
class LlamaDeviceMaps : public DeviceMaps {
 protected:
  // Waits for the background prefetch to finish (it is charged when its copy completes).
  static bool StagingSettlesAt(const runtime::RuntimeAccounting& figures, uint64_t bytes) {
    for (int i = 0; i < 500; ++i) {
      if (figures.Used("cuda:0", MemoryKind::kStaging) == bytes) return true;
      usleep(10000);
    }
    return false;
  }
};

TEST_P(LlamaDeviceMaps, CountersMatchWhatTheMapPredicts) {
  Loaded loaded = Load(
      PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), Gpu(0), kCpu, kCpu}, Gpu(1)), Gpu(0), /*prefetch=*/false));
  ASSERT_NE(loaded.model, nullptr);
  const uint64_t layer2 = BytesOf("model.layers.2"), layer3 = BytesOf("model.layers.3");
  const runtime::RuntimeAccounting& figures = *loaded.accounting;
  EXPECT_EQ(figures.Used("cuda:0", MemoryKind::kWeights),
            BytesOf("model.embed_tokens") + BytesOf("model.layers.0") + BytesOf("model.layers.1"));
  EXPECT_EQ(figures.Used("cpu", MemoryKind::kWeights), layer2 + layer3);
  EXPECT_EQ(figures.Used("cuda:1", MemoryKind::kWeights),
            BytesOf("model.norm") + BytesOf("lm_head"));
  EXPECT_EQ(figures.Used("cuda:0", MemoryKind::kStaging), 0u) << "nothing staged before a pass";

  const uint64_t tokens = prompt_.size(), hidden = 64, vocab = 300;
  ASSERT_TRUE(loaded.model->Forward(prompt_, true).ok());
  // Token ids in, both cpu layers staged in, hidden states across the GPUs, logits out.
  EXPECT_EQ(figures.Transferred("cpu", "cuda:0"), tokens * 8 + layer2 + layer3);
  EXPECT_EQ(figures.Transferred("cuda:0", "cuda:1"), tokens * hidden * 4);
  EXPECT_EQ(figures.Transferred("cuda:1", "cpu"), tokens * vocab * 4);
  EXPECT_EQ(figures.Transferred("cuda:0", "cpu"), 0u);
  EXPECT_EQ(figures.Used("cuda:0", MemoryKind::kStaging), 0u) << "staging given back";
  // Compute time per block, in execution order, one pass each.
  const runtime::RuntimeFigures after_pass = figures.Figures();
  std::vector<std::string> blocks;
  for (const runtime::BlockCompute& block : after_pass.block_compute) {
    blocks.push_back(block.block);
    EXPECT_EQ(block.passes, 1u) << block.block;
    EXPECT_GT(block.seconds, 0) << block.block;
  }
  EXPECT_EQ(blocks, (std::vector<std::string>{"model.embed_tokens", "model.layers.0",
                                              "model.layers.1", "model.layers.2", "model.layers.3",
                                              "model.norm", "lm_head"}));

  // The paged KV cache is held from the start: room for 8 sequences of the model's 2048
  // positions (1024 blocks of 16) in every layer, on the device each layer executes on: all
  // four on cuda:0 (two resident, two staged), keys + values, 2 kv heads x 16 dims.
  const uint64_t pool_per_layer = 2 * 2 * 16 * (1024 * 16) * 4;
  using Blocks = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(figures.Used("cuda:0", MemoryKind::kKvCache), 4 * pool_per_layer);
  EXPECT_EQ(figures.Used("cuda:1", MemoryKind::kKvCache), 0u);
  EXPECT_EQ(figures.KvBlocks("cuda:0"), (Blocks{0, 1024}));
  EXPECT_EQ(figures.KvBlocks("cuda:1"), (Blocks{0, 0})) << "no layer runs on cuda:1";
  {
    auto sequence = loaded.model->NewSequence(40);
    ASSERT_TRUE(sequence.ok());
    EXPECT_EQ(figures.KvBlocks("cuda:0"), (Blocks{3, 1021})) << "40 positions take 3 blocks";
  }
  EXPECT_EQ(figures.KvBlocks("cuda:0"), (Blocks{0, 1024})) << "given back with the sequence";
  EXPECT_EQ(figures.Used("cuda:0", MemoryKind::kKvCache), 4 * pool_per_layer);
}

TEST_P(LlamaDeviceMaps, AnOffloadedEmbeddingIsLookedUpWhereItLivesNotStaged) {
  for (const Device embedding : {kCpu, kDisk}) {
    // No prefetch: layer 2 is staged exactly once per pass.
    Loaded loaded = Load(PlanOf(MapOf(arch(), embedding, {Gpu(0), Gpu(0), kCpu, Gpu(0)}, Gpu(0)),
                                Gpu(0), /*prefetch=*/false));
    ASSERT_NE(loaded.model, nullptr);
    auto logits = loaded.model->Forward(prompt_, true);
    ASSERT_TRUE(logits.ok()) << logits.status();
    ExpectSameLogits(*logits, embedding.Name());
    // The lookup runs in host memory (the token ids stay there) and the prompt's rows reach
    // cuda:0 as hidden states, beside the staged layer 2; the 300 x 64 table never moves.
    const uint64_t tokens = prompt_.size(), hidden = 64;
    EXPECT_EQ(loaded.accounting->Transferred("cpu", "cuda:0"),
              tokens * hidden * 4 + BytesOf("model.layers.2"))
        << embedding.Name();
    EXPECT_EQ(loaded.accounting->Transferred("disk", "cuda:0"), 0u) << embedding.Name();
  }
}

TEST_P(LlamaDeviceMaps, PrefetchStagesTheNextOffloadedBlockAhead) {
  Loaded loaded =
      Load(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), Gpu(0), kCpu, kCpu}, Gpu(1)), Gpu(0)));
  ASSERT_NE(loaded.model, nullptr);
  const uint64_t layer2 = BytesOf("model.layers.2"), layer3 = BytesOf("model.layers.3");
  const uint64_t tokens = prompt_.size();
  ASSERT_TRUE(loaded.model->Forward(prompt_, true).ok());
  // Layer 3 was staged while layer 2 computed, and layers 2 and 3 again, for the next pass,
  // once their slots were free: they stay staged (the two-slot reserve) until then.
  ASSERT_TRUE(StagingSettlesAt(*loaded.accounting, layer2 + layer3));
  EXPECT_EQ(loaded.accounting->Transferred("cpu", "cuda:0"),
            tokens * 8 + 2 * layer2 + 2 * layer3);
  ASSERT_TRUE(loaded.model->Forward(prompt_, true).ok());
  ASSERT_TRUE(StagingSettlesAt(*loaded.accounting, layer2 + layer3));
  EXPECT_EQ(loaded.accounting->Transferred("cpu", "cuda:0"),
            2 * tokens * 8 + 3 * layer2 + 3 * layer3);
}

TEST_P(LlamaDeviceMaps, StagedBlocksReuseTheTwoStagingSlotsOnEveryPass) {
  // Every layer on cpu, run on one virtual GPU: four staged blocks per pass, two slots.
  std::vector<runtime::BlockSpec> blocks;
  for (int i = 0; i < kLayers; ++i) {
    runtime::BlockSpec spec{absl::StrCat(arch().layer_prefix, i), {}};
    for (const auto& [name, info] : checkpoint_->tensors()) {
      if (name.rfind(spec.module + ".", 0) == 0) spec.tensors.push_back({name});
    }
    blocks.push_back(std::move(spec));
  }
  for (bool prefetch : {false, true}) {
    RuntimePlan plan = PlanOf({{"", kCpu}}, Gpu(0), prefetch);
    plan.virtual_gpus = true;
    auto accounting = std::make_shared<runtime::RuntimeAccounting>(
        std::vector<std::string>{"cuda:0", "cpu"});
    auto runner = runtime::BlockRunner::Create(checkpoint_, blocks, plan, at::kFloat, accounting);
    ASSERT_TRUE(runner.ok()) << runner.status();
    std::set<const void*> storages;
    for (int pass_number = 0; pass_number < 3; ++pass_number) {
      runtime::BlockRunner::Pass pass(**runner);
      for (size_t block = 0; block < blocks.size(); ++block) {
        const runtime::BlockWeights& weights = pass.Enter(block, {});
        ASSERT_EQ(weights.size(), blocks[block].tensors.size());
        for (size_t t = 0; t < weights.size(); ++t) {
          auto source = checkpoint_->ReadTensor(blocks[block].tensors[t].name, at::kFloat,
                                                at::Device(at::kCPU));
          ASSERT_TRUE(source.ok()) << source.status();
          EXPECT_TRUE(at::equal(weights[t], *source)) << blocks[block].tensors[t].name;
          EXPECT_TRUE(weights[t].is_alias_of(weights[0])) << "a staged block lives in one slot";
          storages.insert(weights[t].storage().data());
        }
        pass.Exit({});
      }
    }
    // Without prefetch a block is released before the next is staged, so one slot serves all.
    EXPECT_EQ(storages.size(), prefetch ? 2u : 1u)
        << "4 staged blocks x 3 passes reuse the slots, prefetch " << prefetch;
  }
}

TEST_P(LlamaDeviceMaps, ConvertedDiskTensorsComeFromTheOffloadStore) {
  const fs::path f16 = dir_.string() + "-f16";
  ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", f16.string(), " ",
                                     arch().writer_args, " --dtype F16 > /dev/null")
                            .c_str()),
            0);
  auto checkpoint = loader::Checkpoint::Open(f16.string());
  ASSERT_TRUE(checkpoint.ok());
  auto on_cpu = LoadCausalLm(*checkpoint);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  RuntimePlan plan = PlanOf({{"", kDisk}}, Gpu(0));
  plan.virtual_gpus = true;
  plan.offload_dir = (f16 / "offload").string();
  auto on_disk = LoadCausalLm(*checkpoint, ModelRuntime{plan, nullptr});
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_TRUE(fs::exists(f16 / "offload" / "placer-offload.safetensors"));
  auto want = (*on_cpu)->Forward(prompt_, true);
  auto got = (*on_disk)->Forward(prompt_, true);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->values, want->values);
  fs::remove_all(f16);
}

INSTANTIATE_TEST_SUITE_P(Llama, LlamaDeviceMaps, ::testing::Values(kLlama),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace placer::model
