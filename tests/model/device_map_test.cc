// Any valid device map gives the single-device answer: the same checkpoint run on one device,
// across 2 and 4 virtual GPUs, partly on cpu or disk with staging, and fully offloaded gives
// the same logits, and the transfer counters equal what the map predicts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/causal_lm.h"
#include "runtime/block_runner.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using placement::Device;
using runtime::MemoryKind;
using runtime::RuntimePlan;
using DeviceMap = std::vector<std::pair<std::string, Device>>;

constexpr int kLayers = 4;
const Device kCpu = Device::Cpu();
const Device kDisk = Device::Disk();
Device Gpu(int index) { return Device::Cuda(index); }

struct Architecture {
  std::string name, writer_args, embed, layer_prefix, final_norm, lm_head;
  std::vector<std::string> extra_embed;  // gpt2's position embedding
  bool tied_head = false;  // the lm_head reads the embedding: the plan keeps it with it
};

const Architecture kLlama{"llama",
                          "--arch llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 "
                          "--intermediate 96 --vocab 300 --seed 11",
                          "model.embed_tokens", "model.layers.", "model.norm", "lm_head", {}};
const Architecture kGpt2{"gpt2", "--arch gpt2 --layers 4 --hidden 64 --heads 4 --vocab 300 --seed 12",
                         "transformer.wte", "transformer.h.", "transformer.ln_f", "lm_head",
                         {"transformer.wpe"}, /*tied_head=*/true};
// Every optional tensor present: q/k/v/o and MLP biases, an untied GPT-2 head.
const Architecture kLlamaBiases{"llama_biases",
                                "--arch llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 "
                                "--intermediate 96 --vocab 300 --attention-bias --mlp-bias "
                                "--seed 13",
                                "model.embed_tokens", "model.layers.", "model.norm", "lm_head", {}};
const Architecture kGpt2Untied{"gpt2_untied_head",
                               "--arch gpt2 --layers 4 --hidden 64 --heads 4 --vocab 300 "
                               "--tie-word-embeddings false --seed 14",
                               "transformer.wte", "transformer.h.", "transformer.ln_f", "lm_head",
                               {"transformer.wpe"}};

// Module -> device with layer i on layer_devices[i]; embedding on `first`, the head on `last`.
DeviceMap MapOf(const Architecture& arch, Device first, std::vector<Device> layer_devices,
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

TEST_P(DeviceMaps, SpreadAcrossTwoAndFourVirtualGpus) {
  ExpectSameAnswer(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), Gpu(0), Gpu(1), Gpu(1)}, Gpu(1)), Gpu(0)),
                   "2 GPUs");
  ExpectSameAnswer(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), Gpu(1), Gpu(2), Gpu(3)}, Gpu(3)), Gpu(0)),
                   "4 GPUs");
}

TEST_P(DeviceMaps, PartOnCpuOrDiskStagedOntoTheExecutionGpu) {
  ExpectSameAnswer(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), Gpu(0), kCpu, kCpu}, Gpu(1)), Gpu(0)),
                   "part on cpu");
  ExpectSameAnswer(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), kDisk, Gpu(1), kDisk}, kCpu), Gpu(0)),
                   "part on disk");
  ExpectSameAnswer(
      PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), kDisk, Gpu(1), kDisk}, kCpu), Gpu(0), false),
      "part on disk, no prefetch");
}

TEST_P(DeviceMaps, EverythingOffloaded) {
  ExpectSameAnswer(PlanOf({{"", kDisk}}, Gpu(0)), "all on disk, run on a GPU");
  ExpectSameAnswer(PlanOf({{"", kCpu}}, Gpu(0)), "all on cpu, run on a GPU");
  ExpectSameAnswer(PlanOf({{"", kDisk}}, kCpu), "all on disk, no GPU");
  ExpectSameAnswer(PlanOf(MapOf(arch(), kCpu, {kDisk, kCpu, kDisk, kDisk}, kCpu), kCpu),
                   "cpu and disk, no GPU");
}

// The planner's degradations (--offload-exec auto): one staging slot when the execution GPU
// has room for one only, then the offloaded blocks run on the cpu where they live.
TEST_P(DeviceMaps, OffloadedBlocksThroughOneSlotOrOnTheCpuGiveTheSameAnswer) {
  RuntimePlan one_slot =
      PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), kCpu, Gpu(1), kDisk}, kCpu), Gpu(0), false);
  one_slot.staging_slots = 1;
  ExpectSameAnswer(one_slot, "staged through one slot");
  // The planner stages onto a later GPU when the first cannot hold the slots.
  ExpectSameAnswer(PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), kCpu, Gpu(1), kDisk}, kCpu), Gpu(1)),
                   "staged onto cuda:1");

  const DeviceMap spread = MapOf(arch(), Gpu(0), {Gpu(0), kCpu, Gpu(1), kDisk}, kCpu);
  ExpectSameAnswer(PlanOf(spread, kCpu), "offloaded blocks run on the cpu");
  Loaded loaded = Load(PlanOf(spread, kCpu));
  ASSERT_NE(loaded.model, nullptr);
  ASSERT_TRUE(loaded.model->Forward(prompt_, /*all_positions=*/false).ok());
  for (const std::string device : {"cuda:0", "cuda:1", "cpu"}) {
    EXPECT_EQ(loaded.accounting->Used(device, MemoryKind::kStaging), 0u)
        << device << ": nothing is staged when offloaded blocks run on the cpu";
  }
  // Only activations cross (a row of 64 floats per move), never the layers' weights.
  EXPECT_LT(loaded.accounting->Transferred("cpu", "cuda:0"), BytesOf(arch().layer_prefix + "1"));
  EXPECT_EQ(loaded.accounting->Transferred("disk", "cuda:0"), 0u);
}

TEST_P(DeviceMaps, IncrementalDecodingOnASpreadMapEqualsTheFullForward) {
  Loaded loaded =
      Load(PlanOf(MapOf(arch(), Gpu(0), {Gpu(1), kDisk, kCpu, Gpu(1)}, Gpu(0)), Gpu(0)));
  ASSERT_NE(loaded.model, nullptr);
  auto sequence = loaded.model->NewSequence(static_cast<int64_t>(prompt_.size()));
  ASSERT_TRUE(sequence.ok()) << sequence.status();
  const int64_t vocab = loaded.model->vocab_size();
  for (size_t i = 0; i < prompt_.size(); ++i) {
    auto step = loaded.model->Extend(**sequence, {prompt_[i]});
    ASSERT_TRUE(step.ok()) << step.status();
    for (int64_t v = 0; v < vocab; ++v) {
      const float want = expected_.values[i * vocab + v];
      ASSERT_NEAR(step->values[v], want, 1e-4f * std::max(1.0f, std::abs(want)))
          << "position " << i << " logit " << v;
    }
  }
}

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

TEST_P(DeviceMaps, ABatchOfSequencesInOnePassEqualsEachAlone) {
  Loaded alone = Load(RuntimePlan::AllOnCpu());
  Loaded batched =
      Load(PlanOf(MapOf(arch(), Gpu(0), {Gpu(1), kDisk, kCpu, Gpu(1)}, Gpu(0)), Gpu(0)));
  ASSERT_NE(alone.model, nullptr);
  ASSERT_NE(batched.model, nullptr);
  // Steps of three sequences: prefills of different lengths, decodes, and one joining late.
  const std::vector<std::vector<std::vector<int32_t>>> steps = {
      {{5, 17, 42, 99, 7}, {250, 3, 8}, {}},
      {{11}, {12, 13}, {1, 2, 3, 4}},
      {{21}, {22}, {23}},
  };
  const int64_t vocab = alone.model->vocab_size();
  std::vector<std::unique_ptr<SequenceCache>> alone_caches, batched_caches;
  for (int i = 0; i < 3; ++i) {
    alone_caches.push_back(*alone.model->NewSequence(16));
    batched_caches.push_back(*batched.model->NewSequence(16));
  }
  for (size_t step = 0; step < steps.size(); ++step) {
    std::vector<CausalLm::SequenceStep> batch;
    std::vector<float> want;
    for (size_t i = 0; i < 3; ++i) {
      if (steps[step][i].empty()) continue;
      batch.push_back({batched_caches[i].get(), steps[step][i]});
      auto logits = alone.model->Extend(*alone_caches[i], steps[step][i]);
      ASSERT_TRUE(logits.ok()) << logits.status();
      want.insert(want.end(), logits->values.begin(), logits->values.end());
    }
    auto got = batched.model->ExtendBatch(batch);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->shape, (std::vector<int64_t>{static_cast<int64_t>(batch.size()), vocab}));
    for (size_t v = 0; v < want.size(); ++v) {
      ASSERT_NEAR(got->values[v], want[v], 1e-4f * std::max(1.0f, std::abs(want[v])))
          << "step " << step << ", value " << v;
    }
  }
  EXPECT_EQ(batched_caches[0]->length(), 7);
  EXPECT_EQ(batched_caches[2]->length(), 5);

  // An entry that does not fit fails the whole step, naming it, and advances nobody.
  auto refused = batched.model->ExtendBatch(
      {{batched_caches[0].get(), {1}}, {batched_caches[1].get(), std::vector<int32_t>(20, 1)}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("batch[1]: token_ids"), std::string::npos)
      << refused.status();
  EXPECT_EQ(batched_caches[0]->length(), 7);
}

TEST_P(DeviceMaps, MapsThatCannotRunAreRefusedNamingTheBlock) {
  RuntimePlan split = PlanOf(MapOf(arch(), Gpu(0), {Gpu(0), Gpu(0), Gpu(1), Gpu(1)}, Gpu(1)), Gpu(0));
  const std::string layer = arch().layer_prefix + "2";
  split.device_map.emplace_back(layer + ".mlp", kCpu);
  split.virtual_gpus = true;
  auto refused = LoadCausalLm(checkpoint_, ModelRuntime{split, nullptr});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("block " + layer + " is split"), std::string::npos)
      << refused.status();

  RuntimePlan uncovered = PlanOf({{arch().embed, Gpu(0)}}, Gpu(0));
  uncovered.virtual_gpus = true;
  auto missing = LoadCausalLm(checkpoint_, ModelRuntime{uncovered, nullptr});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no entry covers tensor"), std::string::npos)
      << missing.status();
}

INSTANTIATE_TEST_SUITE_P(Architectures, DeviceMaps,
                         ::testing::Values(kLlama, kGpt2, kLlamaBiases, kGpt2Untied),
                         [](const auto& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Llama, LlamaDeviceMaps, ::testing::Values(kLlama),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace placer::model
