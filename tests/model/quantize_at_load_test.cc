// --quantize at load: a model whose decoder-layer linear weights are packed gives the logits
// of the same model with those weights replaced by their exact dequantization (written as an
// F32 checkpoint and served unquantized), on one device and with quantized blocks on cpu
// staged onto a virtual GPU in their packed bytes; the weight counters hold packed bytes;
// decode steps give the same logits alone and batched.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <list>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "loader/architectures/architecture.h"
#include "loader/quantized_slots.h"
#include "loader/checkpoint.h"
#include "loader/dtype_torch.h"
#include "loader/quantized_weight.h"
#include "loader/safetensors_writer.h"
#include "model/causal_lm.h"
#include "tests/model/model_checks.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using placement::Device;
using runtime::MemoryKind;
using runtime::RuntimePlan;
using model_checks::ExpectLogitsClose;
using model_checks::StagedBytesOnWholeBlocks;

struct Case {
  std::string name, writer_args, quantize;
  int64_t group_size;
  std::string lm_head = "none";  // --quantize-lm-head
};
// Test names and failure messages show the case's name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class QuantizeAtLoad : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("placer-quantize-", getpid(), "-", GetParam().name);
    fs::remove_all(dir_);
    ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", (dir_ / "model").string(),
                                       " ", GetParam().writer_args, " > /dev/null")
                              .c_str()),
              0);
    auto checkpoint = loader::Checkpoint::Open((dir_ / "model").string());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = *checkpoint;
    auto options = loader::ParseQuantizeOptions(GetParam().quantize, GetParam().group_size,
                                                GetParam().lm_head);
    ASSERT_TRUE(options.ok()) << options.status();
    quantize_ = *options;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The reference: the same checkpoint with every linear weight (and under
  // --quantize-lm-head the head's, stored [vocab, hidden]) replaced by the float32 weight its
  // packed form stands for (quantized by the same deterministic packer).
  std::shared_ptr<const loader::Checkpoint> DequantizedReference() {
    const fs::path out = dir_ / "reference";
    fs::create_directories(out);
    fs::copy_file(dir_ / "model" / "config.json", out / "config.json");
    const loader::ArchitectureDescription arch = loader::DescribeArchitecture(checkpoint_->config());
    std::map<std::string, loader::LinearWeight> linear;
    std::set<std::string> head_tables;  // the lm_head's weight, or the table a tied one reads
    for (const loader::TensorDescription* slot : arch.Slots()) {
      linear[slot->name] = slot->linear;
      if (loader::HoldsLmHead(*slot)) head_tables.insert(slot->source());
    }
    loader::SafetensorsWriter writer(std::map<std::string, std::string>{{"format", "pt"}});
    std::list<at::Tensor> keep;
    for (const auto& [name, info] : checkpoint_->tensors()) {
      at::Tensor tensor = *checkpoint_->ReadTensor(name, at::kFloat, at::kCPU);
      const bool head = head_tables.count(arch.CanonicalName(name)) > 0 && GetParam().lm_head != "none";
      const loader::LinearWeight kind = head ? loader::LinearWeight::kOutIn : linear[arch.CanonicalName(name)];
      if (kind != loader::LinearWeight::kNone) {
        const bool in_out = kind == loader::LinearWeight::kInOut;
        const at::Tensor w = in_out ? tensor.t() : tensor;
        const loader::PackedLayout layout = *loader::PackedLayoutFor(
            head ? quantize_.LmHead() : quantize_, w.size(0), w.size(1), name);
        tensor = loader::DequantizeLinearWeight(*loader::QuantizeLinearWeight(w, layout, name), at::kFloat);
        if (in_out) tensor = tensor.t();
      }
      keep.push_back(tensor.contiguous());
      const at::Tensor& kept = keep.back();
      EXPECT_TRUE(writer.AddBytes(info.stored_name, loader::DType::kF32, kept.sizes().vec(),
                                  absl::string_view(static_cast<const char*>(kept.data_ptr()),
                                                    kept.nbytes()))
                      .ok());
    }
    EXPECT_TRUE(writer.Write((out / "model.safetensors").string()).ok());
    auto reference = loader::Checkpoint::Open(out.string());
    EXPECT_TRUE(reference.ok()) << reference.status();
    return reference.ok() ? *reference : nullptr;
  }

  std::unique_ptr<CausalLm> Load(std::shared_ptr<const loader::Checkpoint> checkpoint,
                                 RuntimePlan plan, bool quantized,
                                 std::shared_ptr<runtime::RuntimeAccounting>* accounting = nullptr) {
    if (quantized) plan.quantize = quantize_;
    plan.virtual_gpus = true;
    ModelRuntime runtime{plan, std::make_shared<runtime::RuntimeAccounting>(
                                   std::vector<std::string>{"cuda:0", "cpu"})};
    if (accounting != nullptr) *accounting = runtime.accounting;
    auto model = LoadCausalLm(std::move(checkpoint), runtime);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }


  bool tied() const { return checkpoint_->config().tie_word_embeddings; }
  std::string embedding_module() const {
    return checkpoint_->config().is_gpt2() ? "transformer.wte" : "model.embed_tokens";
  }

  fs::path dir_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_;
  loader::QuantizeOptions quantize_;
  std::vector<int32_t> prompt_{5, 17, 42, 99, 7, 250, 3, 8, 120, 33, 64, 1};
};

TEST_P(QuantizeAtLoad, LogitsEqualTheDequantizedReference) {
  auto reference_checkpoint = DequantizedReference();
  ASSERT_NE(reference_checkpoint, nullptr);
  auto reference = Load(reference_checkpoint, RuntimePlan::AllOnCpu(), false);
  auto unquantized = Load(checkpoint_, RuntimePlan::AllOnCpu(), false);
  auto quantized = Load(checkpoint_, RuntimePlan::AllOnCpu(), true);
  ASSERT_TRUE(reference && unquantized && quantized);
  // A prompt chunk beyond the kernels' rows (dequantize + GEMM), one within them, one row.
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 150; ++i) long_prompt.push_back((i * 37 + 5) % 300);
  for (size_t length : {long_prompt.size(), size_t{12}, size_t{1}}) {
    const std::vector<int32_t> prompt(long_prompt.begin(), long_prompt.begin() + length);
    auto want = reference->Forward(prompt, /*all_positions=*/true);
    auto got = quantized->Forward(prompt, /*all_positions=*/true);
    auto original = unquantized->Forward(prompt, true);
    ASSERT_TRUE(want.ok() && got.ok() && original.ok());
    ExpectLogitsClose(*got, *want, absl::StrCat(length, " tokens"));
    // The reference is not the unquantized model: the test would notice a packer that does
    // nothing.
    double drift = 0;
    for (size_t i = 0; i < got->values.size(); ++i) {
      drift = std::max(drift, double(std::abs(got->values[i] - original->values[i])));
    }
    EXPECT_GT(drift, 1e-4) << "quantized logits equal the unquantized ones";
  }
}

TEST_P(QuantizeAtLoad, DecodeStepsMatchTheReferenceAloneAndBatched) {
  auto reference = Load(DequantizedReference(), RuntimePlan::AllOnCpu(), false);
  auto quantized = Load(checkpoint_, RuntimePlan::AllOnCpu(), true);
  ASSERT_TRUE(reference && quantized);
  auto want = reference->Forward(prompt_, /*all_positions=*/true);
  ASSERT_TRUE(want.ok());
  const int64_t vocab = want->shape.back();
  // Token by token: every step a one-row product through the packed kernels.
  auto alone = quantized->NewSequence(static_cast<int64_t>(prompt_.size()));
  auto other = quantized->NewSequence(static_cast<int64_t>(prompt_.size()));
  auto batched = quantized->NewSequence(static_cast<int64_t>(prompt_.size()));
  ASSERT_TRUE(alone.ok() && other.ok() && batched.ok());
  for (size_t i = 0; i < prompt_.size(); ++i) {
    auto step = quantized->Extend(**alone, {prompt_[i]});
    ASSERT_TRUE(step.ok()) << step.status();
    auto pair = quantized->ExtendBatch({{other->get(), {prompt_[(i + 5) % prompt_.size()]}},
                                        {batched->get(), {prompt_[i]}}});
    ASSERT_TRUE(pair.ok()) << pair.status();
    for (int64_t v = 0; v < vocab; ++v) {
      const float expected = want->values[i * vocab + v];
      ASSERT_NEAR(step->values[v], expected, 2e-5f * std::max(1.0f, std::abs(expected)))
          << "position " << i << " logit " << v;
      if (checkpoint_->config().is_gpt2()) {
        // GPT-2's lm_head is ATen's linear (BLAS), whose last bits depend on the row count
        // (as without --quantize): the layers are exact, the head within float rounding.
        ASSERT_NEAR(step->values[v], pair->values[vocab + v], 1e-5f * std::max(1.0f, std::abs(expected)))
            << "position " << i << ": alone and batched differ at logit " << v;
      } else {
        ASSERT_EQ(step->values[v], pair->values[vocab + v])
            << "position " << i << ": alone and batched differ at logit " << v;
      }
    }
  }
}

TEST_P(QuantizeAtLoad, QuantizedBlocksOnCpuAreStagedInTheirPackedBytes) {
  auto reference = Load(DequantizedReference(), RuntimePlan::AllOnCpu(), false);
  RuntimePlan plan;
  const bool gpt2 = checkpoint_->config().is_gpt2();
  const std::string layers = gpt2 ? "transformer.h." : "model.layers.";
  plan.device_map = {{"", Device::Cuda(0)}, {layers + "1", Device::Cpu()}};
  plan.execution_device = Device::Cuda(0);
  std::shared_ptr<runtime::RuntimeAccounting> accounting;
  auto quantized = Load(checkpoint_, plan, true, &accounting);
  ASSERT_TRUE(reference && quantized);
  auto want = reference->Forward(prompt_, true);
  auto got = quantized->Forward(prompt_, true);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  ExpectLogitsClose(*got, *want, "layer 1 staged from cpu");
  // The cpu holds layer 1 packed: its linear weights at packed size, the rest as stored.
  uint64_t packed = 0;
  const loader::ArchitectureDescription arch = loader::DescribeArchitecture(checkpoint_->config());
  for (const loader::BlockDescription& block : arch.blocks) {
    if (block.module != layers + "1") continue;
    for (const loader::TensorDescription& slot : block.tensors) {
      if (!slot.present) continue;
      const int64_t elements = checkpoint_->Find(slot.name)->num_elements;
      if (slot.linear == loader::LinearWeight::kNone) {
        packed += static_cast<uint64_t>(elements) * 4;
        continue;
      }
      const bool in_out = slot.linear == loader::LinearWeight::kInOut;
      packed += loader::PackedLayoutFor(quantize_, slot.shape[in_out ? 1 : 0],
                                        slot.shape[in_out ? 0 : 1], slot.name)
                    ->bytes();
    }
  }
  EXPECT_EQ(accounting->Used("cpu", MemoryKind::kWeights), packed);
  // Layer 1 staged whole in its packed bytes (for this pass, and prefetched again for the
  // next: the stager runs cyclically); the only other bytes crossing are the token ids.
  const uint64_t moved =
      StagedBytesOnWholeBlocks(*accounting, prompt_.size() * sizeof(int64_t), packed);
  EXPECT_GE(moved, packed);
  EXPECT_EQ(moved % packed, 0u) << moved << " bytes staged for a block of " << packed;
}

TEST_P(QuantizeAtLoad, QuantizedBlocksOnDiskComeFromTheOffloadStoreOnceAndAreReused) {
  auto reference = Load(DequantizedReference(), RuntimePlan::AllOnCpu(), false);
  ASSERT_NE(reference, nullptr);
  auto want = reference->Forward(prompt_, true);
  ASSERT_TRUE(want.ok());
  const std::string layers = checkpoint_->config().is_gpt2() ? "transformer.h." : "model.layers.";
  const fs::path store = dir_ / "offload" / "placer-offload.safetensors";
  fs::file_time_type written;
  for (int start = 0; start < 2; ++start) {
    for (const Device execution : {Device::Cuda(0), Device::Cpu()}) {
      RuntimePlan plan;
      plan.device_map = {{"", Device::Cpu()}, {layers + "0", Device::Disk()}};
      // A packed head on disk too: its packed bytes join the store (a tied one is the
      // embedding table, looked up there too).
      if (GetParam().lm_head != "none") {
        plan.device_map.push_back({tied() ? embedding_module() : "lm_head", Device::Disk()});
      }
      if (execution.is_gpu()) plan.device_map.front().second = Device::Cuda(0);
      plan.execution_device = execution;
      plan.offload_dir = (dir_ / "offload").string();
      auto quantized = Load(checkpoint_, plan, true);
      ASSERT_NE(quantized, nullptr);
      auto got = quantized->Forward(prompt_, true);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectLogitsClose(*got, *want, absl::StrCat("layer 0 on disk, run on ", execution.Name()));
      ASSERT_TRUE(fs::exists(store));
      if (start == 0 && execution.is_gpu()) written = fs::last_write_time(store);
      EXPECT_EQ(fs::last_write_time(store), written) << "the packed store is written once";
    }
  }
}

TEST_P(QuantizeAtLoad, TheLmHeadIsHeldPackedOnlyUnderQuantizeLmHead) {
  std::shared_ptr<runtime::RuntimeAccounting> accounting;
  RuntimePlan plan;
  plan.device_map = {{"", Device::Cpu()}, {"lm_head", Device::Cuda(0)}};
  plan.execution_device = Device::Cuda(0);
  auto quantized = Load(checkpoint_, plan, true, &accounting);
  ASSERT_NE(quantized, nullptr);
  if (tied()) {
    // A tied head is the embedding's table, kept with it on the cpu: held packed once under
    // --quantize-lm-head (the lookup dequantizes its rows), else as stored.
    const loader::TensorInfo* table = checkpoint_->Find(embedding_module() + ".weight");
    ASSERT_NE(table, nullptr);
    RuntimePlan layers_only = plan;
    std::shared_ptr<runtime::RuntimeAccounting> layers_accounting;
    const loader::QuantizeOptions with_head = quantize_;
    quantize_.lm_head = loader::QuantScheme::kNone;
    auto unpacked_table = Load(checkpoint_, layers_only, true, &layers_accounting);
    quantize_ = with_head;
    ASSERT_NE(unpacked_table, nullptr);
    const uint64_t stored = static_cast<uint64_t>(table->num_elements) * 4;
    const uint64_t packed =
        loader::PackedLayoutFor(quantize_.LmHead(), table->shape[0], table->shape[1], "table")->bytes();
    EXPECT_EQ(layers_accounting->Used("cpu", MemoryKind::kWeights) - accounting->Used("cpu", MemoryKind::kWeights),
              GetParam().lm_head == "none" ? 0 : stored - packed);
    EXPECT_EQ(accounting->Used("cuda:0", MemoryKind::kWeights), 0u);
    return;
  }
  const loader::TensorInfo* head = checkpoint_->Find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  const uint64_t packed = loader::PackedLayoutFor(quantize_.LmHead(), head->shape[0], head->shape[1],
                                                  "lm_head.weight")
                              ->bytes();
  const uint64_t stored = static_cast<uint64_t>(head->num_elements) * 4;
  EXPECT_EQ(accounting->Used("cuda:0", MemoryKind::kWeights),
            GetParam().lm_head == "none" ? stored : packed);
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, QuantizeAtLoad,
    ::testing::Values(
        Case{"llama_int8", "--arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2 --intermediate 256 --vocab 300 --seed 21", "int8", 0},
        Case{"llama_int4_g32", "--arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2 --intermediate 256 --vocab 300 --attention-bias --mlp-bias --seed 22", "int4", 32},
        Case{"llama_int4_g128", "--arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2 --intermediate 256 --vocab 300 --seed 23", "int4", 128},
        Case{"gpt2_int4_g32", "--arch gpt2 --layers 2 --hidden 128 --heads 4 --vocab 300 --seed 24", "int4", 32},
        Case{"gpt2_int8", "--arch gpt2 --layers 2 --hidden 128 --heads 4 --vocab 300 --seed 25", "int8", 0},
        Case{"llama_int4_head_int8", "--arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2 --intermediate 256 --vocab 300 --tie-word-embeddings false --seed 26", "int4", 128, "int8"},
        Case{"llama_int8_head_int4", "--arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2 --intermediate 256 --vocab 300 --tie-word-embeddings false --mlp-bias --seed 27", "int8", 0, "int4"},
        // Tied heads: the embedding table packed once, read by the head and the lookup.
        Case{"llama_tied_int4_head_int8", "--arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2 --intermediate 256 --vocab 300 --tie-word-embeddings true --seed 28", "int4", 32, "int8"},
        Case{"gpt2_int8_tied_head_int4", "--arch gpt2 --layers 2 --hidden 128 --heads 4 --vocab 300 --seed 29", "int8", 0, "int4"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace placer::model
