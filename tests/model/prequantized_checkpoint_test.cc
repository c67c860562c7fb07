// Pre-quantized checkpoints (GPTQ v1/v2 with and without activation order, AWQ GEMM, compressed-tensors pack-quantized and
// int-quantized), written by an independent Python packer (prequantized_writer.py) from a
// random Llama with every bias: their logits equal those of the same model with each linear
// weight replaced by its float dequantization (written by the same packer, served
// unquantized); decode steps agree alone and batched; layers on cpu (staged) and on disk (the
// offload store) hold and move packed bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <filesystem>
#include <optional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "loader/architectures/architecture.h"
#include "loader/checkpoint.h"
#include "loader/prequantized_tensors.h"
#include "model/causal_lm.h"
#include "model/quantized_linear.h"
#include "model/quantized_vnni.h"
#include "placement/model_module_tree.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using placement::Device;
using runtime::MemoryKind;
using runtime::RuntimePlan;

struct Case {
  std::string name, format;
  int bits;
  int group_size;
  std::string flags;  // --sym, --quantize-config-file, --float-modules=...
  // The linears the checkpoint leaves unquantized (what --float-modules names, spelled out).
  std::set<std::string> float_modules = {};
  // GPTQ lm_head: true (--lm-head): the base gets a vocabulary GPTQ can pack along its outputs.
  bool lm_head = false;
  // Several compressed-tensors config groups (ct-mixed): {bits, group size} of the linears
  // not in `bits`/`group_size`, by full module name or by name in every layer ("self_attn.q_proj").
  std::map<std::string, std::pair<int, int>> schemes = {};

  std::pair<int, int> SchemeOf(const std::string& module) const {
    if (auto it = schemes.find(module); it != schemes.end()) return it->second;
    const std::string in_layer = module.substr(module.find('.', std::string("model.layers.").size()) + 1);
    if (auto it = schemes.find(in_layer); it != schemes.end()) return it->second;
    return {bits, group_size};
  }
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PrequantizedCheckpoint : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("placer-prequant-", getpid(), "-", GetParam().name);
    fs::remove_all(dir_);
    const std::string base = (dir_ / "base").string();
    ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", base,
                                       " --arch llama --layers 2 --hidden 128 --heads 4 --kv-heads 2"
                                       " --intermediate 256 --vocab ", GetParam().lm_head ? 304 : 300,
                                       " --attention-bias --mlp-bias --seed 31 > /dev/null")
                              .c_str()),
              0);
    const Case& c = GetParam();
    ASSERT_EQ(std::system(absl::StrCat("/usr/bin/python3 ", PLACER_SOURCE_DIR,
                                       "/tests/model/prequantized_writer.py ", base, " ",
                                       (dir_ / "model").string(), " ", (dir_ / "reference").string(),
                                       " ", c.format, " ", c.bits, " ", c.group_size, " ", c.flags)
                              .c_str()),
              0);
    auto checkpoint = loader::Checkpoint::Open((dir_ / "model").string());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = *checkpoint;
    auto reference = loader::Checkpoint::Open((dir_ / "reference").string());
    ASSERT_TRUE(reference.ok()) << reference.status();
    reference_ = *reference;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<CausalLm> Load(std::shared_ptr<const loader::Checkpoint> checkpoint,
                                 RuntimePlan plan,
                                 std::shared_ptr<runtime::RuntimeAccounting>* accounting = nullptr,
                                 std::optional<loader::DType> dtype = std::nullopt) {
    plan.virtual_gpus = true;
    ModelRuntime runtime{plan, std::make_shared<runtime::RuntimeAccounting>(
                                   std::vector<std::string>{"cuda:0", "cpu"})};
    if (dtype) runtime.compute_dtype = *dtype;
    if (accounting != nullptr) *accounting = runtime.accounting;
    auto model = LoadCausalLm(std::move(checkpoint), runtime);
    EXPECT_TRUE(model.ok()) << model.status();
    return model.ok() ? *std::move(model) : nullptr;
  }

  static void ExpectClose(const Logits& actual, const Logits& expected, const std::string& what) {
    ASSERT_EQ(actual.shape, expected.shape) << what;
    for (size_t i = 0; i < actual.values.size(); ++i) {
      ASSERT_NEAR(actual.values[i], expected.values[i], 2e-5f * std::max(1.0f, std::abs(expected.values[i])))
          << what << ": logit " << i;
    }
  }

  // A prompt chunk beyond the kernels' rows (dequantize + GEMM), one within them, one row.
  static std::vector<std::vector<int32_t>> ChunkPrompts() {
    std::vector<int32_t> long_prompt;
    for (int i = 0; i < 150; ++i) long_prompt.push_back((i * 37 + 5) % 300);
    return {long_prompt, {long_prompt.begin(), long_prompt.begin() + 12}, {long_prompt.front()}};
  }

  // The largest |got - want| of a row relative to that row's largest |want|, over all rows
  // (the same shapes).
  static double WorstRelativeError(const Logits& got, const Logits& want) {
    const int64_t vocab = want.shape.back();
    double worst = 0;
    for (int64_t row = 0; row < want.shape[0]; ++row) {
      double scale = 0, error = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        const double w = want.values[row * vocab + v], g = got.values[row * vocab + v];
        scale = std::max(scale, std::abs(w));
        error = std::max(error, std::abs(w - g));
      }
      worst = std::max(worst, error / scale);
    }
    return worst;
  }

  // Bytes layer `layer` holds: its linear weights packed, the rest in F32.
  uint64_t LayerBytes(const std::string& module) const {
    uint64_t bytes = 0;
    const loader::ArchitectureDescription arch = loader::DescribeArchitecture(checkpoint_->config());
    for (const loader::BlockDescription& block : arch.blocks) {
      if (block.module != module) continue;
      for (const loader::TensorDescription& slot : block.tensors) {
        if (!slot.present) continue;
        const loader::QuantizedLinearSource* source = checkpoint_->QuantizedLinear(slot.name);
        bytes += source != nullptr ? source->layout.bytes()
                                   : static_cast<uint64_t>(checkpoint_->Find(slot.name)->num_elements) * 4;
      }
    }
    return bytes;
  }

  fs::path dir_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_, reference_;
  std::vector<int32_t> prompt_{5, 17, 42, 99, 7, 250, 3, 8, 120, 33, 64, 1};
};

TEST_P(PrequantizedCheckpoint, EveryLinearWeightIsRepackedNotReadAsAFloatWeight) {
  const loader::ArchitectureDescription arch = loader::DescribeArchitecture(checkpoint_->config());
  int linear = 0;
  for (const loader::TensorDescription* slot : arch.Slots()) {
    if (slot->linear == loader::LinearWeight::kNone) continue;
    ++linear;
    const loader::QuantizedLinearSource* source = checkpoint_->QuantizedLinear(slot->name);
    if (GetParam().float_modules.count(std::string(loader::ModuleOf(slot->name))) > 0) {
      EXPECT_EQ(source, nullptr) << slot->name << " is left unquantized";
      EXPECT_NE(checkpoint_->Find(slot->name), nullptr) << slot->name;
      continue;
    }
    ASSERT_NE(source, nullptr) << slot->name;
    const auto [bits, group_size] = GetParam().SchemeOf(std::string(loader::ModuleOf(slot->name)));
    EXPECT_EQ(source->layout.bits, bits) << slot->name;
    EXPECT_EQ(source->layout.group_size, group_size == -1 ? source->layout.in : group_size)
        << slot->name;
  }
  EXPECT_EQ(linear, 14);
  const loader::QuantizedLinearSource* head = checkpoint_->QuantizedLinear("lm_head.weight");
  if (GetParam().lm_head) {
    ASSERT_NE(head, nullptr);
    EXPECT_EQ(head->layout.out, 304);
    EXPECT_EQ(head->layout.bits, GetParam().bits);
    EXPECT_EQ(checkpoint_->Find("lm_head.weight"), nullptr);
  } else {
    EXPECT_EQ(head, nullptr);
  }
}

TEST_P(PrequantizedCheckpoint, LogitsEqualTheDequantizedReference) {
  auto reference = Load(reference_, RuntimePlan::AllOnCpu());
  auto quantized = Load(checkpoint_, RuntimePlan::AllOnCpu());
  ASSERT_TRUE(reference && quantized);
  for (const std::vector<int32_t>& prompt : ChunkPrompts()) {
    const size_t length = prompt.size();
    auto want = reference->Forward(prompt, /*all_positions=*/true);
    auto got = quantized->Forward(prompt, /*all_positions=*/true);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    ExpectClose(*got, *want, absl::StrCat(length, " tokens"));
  }
}

// Hub checkpoints store fp16 scales and biases and compute in BF16 on the cpu: the packed
// kernels, the unpacking for prompt chunks and the activation-order gathers of BF16 rows.
TEST_P(PrequantizedCheckpoint, Bf16ComputeFollowsTheReference) {
  auto reference = Load(reference_, RuntimePlan::AllOnCpu());
  auto quantized = Load(checkpoint_, RuntimePlan::AllOnCpu(), nullptr, loader::DType::kBF16);
  ASSERT_TRUE(reference && quantized);
  for (const std::vector<int32_t>& prompt : ChunkPrompts()) {
    const size_t length = prompt.size();
    auto want = reference->Forward(prompt, /*all_positions=*/true);
    auto got = quantized->Forward(prompt, /*all_positions=*/true);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    ASSERT_EQ(got->shape, want->shape);
    const double worst = WorstRelativeError(*got, *want);
    // BF16 rounding of a two-layer model stays within a few percent of the largest logit; a
    // weight multiplied with its inputs in the wrong order is off by order 1.
    EXPECT_LT(worst, 0.05) << length << " tokens";
    EXPECT_GT(worst, 1e-6) << length << " tokens: computed in F32?";
  }
}

// --quantize-activations int8 on a 4-bit checkpoint (groups of 32 or 128: GPTQ's 32g act-order
// checkpoints too, their inputs gathered first): logits near the float reference (the
// activations' rounding), and a row's bits the same alone and batched.
TEST_P(PrequantizedCheckpoint, Int8ActivationsStayNearTheReferenceAndBatchInvariant) {
  const loader::QuantizedLinearSource* q = nullptr;  // layer 0's first quantized linear
  for (const char* linear : {"self_attn.q_proj", "self_attn.k_proj"}) {
    if (q == nullptr) q = checkpoint_->QuantizedLinear(absl::StrCat("model.layers.0.", linear, ".weight"));
  }
  ASSERT_NE(q, nullptr);
  if (!Int8ActivationKernelRuns()) GTEST_SKIP() << "this CPU lacks AVX512-VNNI and AVX-VNNI";
  auto reference = Load(reference_, RuntimePlan::AllOnCpu());
  ASSERT_TRUE(reference);
  // The mode is process-wide (set at load): the float logits first, with it off.
  auto exact = Load(checkpoint_, RuntimePlan::AllOnCpu());
  ASSERT_TRUE(exact);
  ASSERT_FALSE(Int8ActivationsEnabled());
  auto float_logits = exact->Forward(prompt_, true);
  ASSERT_TRUE(float_logits.ok());
  RuntimePlan plan = RuntimePlan::AllOnCpu();
  plan.quantize.int8_activations = true;
  auto quantized = Load(checkpoint_, plan);
  ASSERT_TRUE(quantized);
  struct Reset {
    ~Reset() { SetInt8Activations(false); }
  } reset;
  ASSERT_TRUE(Int8ActivationsEnabled());
  if (!Int8ActivationKernelApplies(q->layout)) {
    // Weights the kernel does not take (8-bit groups that are not a multiple of 128) keep float
    // activations: the exact logits.
    auto mode_logits = quantized->Forward(prompt_, true);
    ASSERT_TRUE(mode_logits.ok());
    EXPECT_EQ(float_logits->values, mode_logits->values);
    return;
  }
  EXPECT_NE(float_logits->values, quantized->Forward(prompt_, true)->values);
  auto want = reference->Forward(prompt_, /*all_positions=*/true);
  auto got = quantized->Forward(prompt_, /*all_positions=*/true);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  const int64_t vocab = want->shape.back();
  ASSERT_EQ(got->shape, want->shape);
  const double worst = WorstRelativeError(*got, *want);
  EXPECT_LT(worst, 0.05) << "int8 activations drift past their rounding";
  EXPECT_GT(worst, 1e-6) << "bit-equal to the float reference: were activations quantized?";
  auto alone = quantized->NewSequence(static_cast<int64_t>(prompt_.size()));
  auto other = quantized->NewSequence(static_cast<int64_t>(prompt_.size()));
  auto batched = quantized->NewSequence(static_cast<int64_t>(prompt_.size()));
  ASSERT_TRUE(alone.ok() && other.ok() && batched.ok());
  for (size_t i = 0; i < prompt_.size(); ++i) {
    auto step = quantized->Extend(**alone, {prompt_[i]});
    auto pair = quantized->ExtendBatch({{other->get(), {prompt_[(i + 5) % prompt_.size()]}},
                                        {batched->get(), {prompt_[i]}}});
    ASSERT_TRUE(step.ok() && pair.ok());
    for (int64_t v = 0; v < vocab; ++v) {
      ASSERT_EQ(step->values[v], pair->values[vocab + v]) << "position " << i << " logit " << v;
    }
  }
}

TEST_P(PrequantizedCheckpoint, DecodeStepsMatchTheReferenceAloneAndBatched) {
  auto reference = Load(reference_, RuntimePlan::AllOnCpu());
  auto quantized = Load(checkpoint_, RuntimePlan::AllOnCpu());
  ASSERT_TRUE(reference && quantized);
  auto want = reference->Forward(prompt_, /*all_positions=*/true);
  ASSERT_TRUE(want.ok());
  const int64_t vocab = want->shape.back();
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
      ASSERT_EQ(step->values[v], pair->values[vocab + v])
          << "position " << i << ": alone and batched differ at logit " << v;
    }
  }
}

// --quantize-lm-head on a checkpoint that leaves its lm_head in float (most GPTQ and AWQ ones
// do): the layers as the checkpoint packs them, the head packed at load; the logits of the
// float reference with its head packed the same way, the head held in its packed bytes. A
// checkpoint that quantizes its head already is refused by the planner, naming the flag.
TEST_P(PrequantizedCheckpoint, QuantizeLmHeadPacksTheFloatHeadAtLoad) {
  const loader::QuantizeOptions head_only = *loader::ParseQuantizeOptions("none", 0, "int8");
  if (GetParam().lm_head) {
    absl::StatusOr<placement::ModuleTreeSpec> spec =
        placement::ModuleTreeSpecForModel(checkpoint_->config(), {}, 0, head_only);
    ASSERT_FALSE(spec.ok());
    EXPECT_NE(spec.status().message().find("already quantizes its lm_head"), std::string::npos)
        << spec.status();
    EXPECT_NE(spec.status().message().find("drop --quantize-lm-head"), std::string::npos)
        << spec.status();
    return;
  }
  RuntimePlan plan = RuntimePlan::AllOnCpu();
  plan.quantize = head_only;
  auto reference = Load(reference_, plan);
  auto quantized = Load(checkpoint_, plan);
  auto float_head = Load(checkpoint_, RuntimePlan::AllOnCpu());
  ASSERT_TRUE(reference && quantized && float_head);
  for (const std::vector<int32_t>& prompt : ChunkPrompts()) {
    auto want = reference->Forward(prompt, /*all_positions=*/true);
    auto got = quantized->Forward(prompt, /*all_positions=*/true);
    ASSERT_TRUE(want.ok() && got.ok()) << got.status();
    ExpectClose(*got, *want, absl::StrCat(prompt.size(), " tokens, lm_head int8"));
  }
  EXPECT_NE(float_head->Forward(prompt_, true)->values, quantized->Forward(prompt_, true)->values)
      << "the head was not packed";
  // Held packed: the head alone on cuda:0.
  RuntimePlan placed;
  placed.device_map = {{"", Device::Cpu()}, {"lm_head", Device::Cuda(0)}};
  placed.execution_device = Device::Cuda(0);
  placed.quantize = head_only;
  std::shared_ptr<runtime::RuntimeAccounting> accounting;
  auto held = Load(checkpoint_, placed, &accounting);
  ASSERT_TRUE(held);
  const loader::TensorInfo* head = checkpoint_->Find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(accounting->Used("cuda:0", MemoryKind::kWeights),
            loader::PackedLayoutFor(head_only.LmHead(), head->shape[0], head->shape[1], "lm_head.weight")
                ->bytes());
  auto logits = held->Forward(prompt_, true);
  ASSERT_TRUE(logits.ok()) << logits.status();
  ExpectClose(*logits, *quantized->Forward(prompt_, true), "lm_head int8 on cuda:0");
}

TEST_P(PrequantizedCheckpoint, LayersOnCpuAreHeldAndStagedInTheirPackedBytes) {
  auto reference = Load(reference_, RuntimePlan::AllOnCpu());
  RuntimePlan plan;
  plan.device_map = {{"", Device::Cuda(0)}, {"model.layers.1", Device::Cpu()}};
  plan.execution_device = Device::Cuda(0);
  std::shared_ptr<runtime::RuntimeAccounting> accounting;
  auto quantized = Load(checkpoint_, plan, &accounting);
  ASSERT_TRUE(reference && quantized);
  auto want = reference->Forward(prompt_, true);
  auto got = quantized->Forward(prompt_, true);
  ASSERT_TRUE(want.ok() && got.ok()) << got.status();
  ExpectClose(*got, *want, "layer 1 staged from cpu");
  const uint64_t packed = LayerBytes("model.layers.1");
  EXPECT_EQ(accounting->Used("cpu", MemoryKind::kWeights), packed);
  // The stager prefetches the block again for the next pass (cyclically): a copy may be under
  // way when the counter is read, so wait (bounded) for it to land on a whole block.
  const auto moved_now = [&] {
    return accounting->Transferred("cpu", "cuda:0") - prompt_.size() * sizeof(int64_t);
  };
  uint64_t moved = moved_now();
  for (int i = 0; i < 500 && moved % packed != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    moved = moved_now();
  }
  EXPECT_GE(moved, packed);
  EXPECT_EQ(moved % packed, 0u) << moved << " bytes staged for a block of " << packed;
}

TEST_P(PrequantizedCheckpoint, LayersOnDiskComeFromTheOffloadStoreOnceAndAreReused) {
  auto reference = Load(reference_, RuntimePlan::AllOnCpu());
  ASSERT_NE(reference, nullptr);
  auto want = reference->Forward(prompt_, true);
  ASSERT_TRUE(want.ok());
  const fs::path store = dir_ / "offload" / "placer-offload.safetensors";
  fs::file_time_type written;
  for (int start = 0; start < 2; ++start) {
    RuntimePlan plan;
    plan.device_map = {{"", Device::Cpu()}, {"model.layers.0", Device::Disk()}};
    plan.execution_device = Device::Cpu();
    plan.offload_dir = (dir_ / "offload").string();
    auto quantized = Load(checkpoint_, plan);
    ASSERT_NE(quantized, nullptr);
    auto got = quantized->Forward(prompt_, true);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectClose(*got, *want, absl::StrCat("layer 0 on disk, start ", start));
    ASSERT_TRUE(fs::exists(store));
    if (start == 0) written = fs::last_write_time(store);
    EXPECT_EQ(fs::last_write_time(store), written) << "the packed store is written once";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, PrequantizedCheckpoint,
    ::testing::Values(Case{"gptq_v1_int4_g32_asym", "gptq", 4, 32, ""},
                      Case{"gptq_v1_int4_g64_sym_quantize_config", "gptq", 4, 64,
                           "--sym --quantize-config-file"},
                      Case{"gptq_v2_int8_per_column", "gptq_v2", 8, -1, ""},
                      Case{"gptq_v1_int8_g32_sym", "gptq", 8, 32, "--sym"},
                      Case{"gptq_v1_int4_g32_act_order", "gptq", 4, 32, "--act-order"},
                      Case{"gptq_v2_int8_g64_sym_act_order", "gptq_v2", 8, 64, "--sym --act-order"},
                      Case{"awq_gemm_int4_g64", "awq", 4, 64, ""},
                      Case{"ct_pack_int4_g32_asym", "ct-pack", 4, 32, ""},
                      Case{"ct_pack_int4_g64_sym_actorder_group", "ct-pack", 4, 64, "--sym --act-order"},
                      Case{"ct_pack_int4_channel_sym", "ct-pack", 4, -1, "--sym"},
                      Case{"ct_pack_int8_g64_sym", "ct-pack", 8, 64, "--sym"},
                      Case{"ct_int8_channel", "ct-int", 8, -1, "--sym"},
                      // Partly quantized: each format's own way of naming the float linears.
                      Case{"gptq_v1_int4_g32_float_o_proj", "gptq", 4, 32,
                           "--float-modules=self_attn.o_proj",
                           {"model.layers.0.self_attn.o_proj", "model.layers.1.self_attn.o_proj"}},
                      Case{"gptq_v1_int4_g32_lm_head", "gptq", 4, 32, "--lm-head", {}, true},
                      Case{"gptq_v2_int8_g64_act_order_lm_head", "gptq_v2", 8, 64,
                           "--sym --act-order --lm-head", {}, true},
                      Case{"gptq_v2_int4_g64_dynamic_float", "gptq_v2", 4, 64,
                           "--sym --act-order --float-modules=self_attn.v_proj,model.layers.1.mlp.down_proj",
                           {"model.layers.0.self_attn.v_proj", "model.layers.1.self_attn.v_proj",
                            "model.layers.1.mlp.down_proj"}},
                      Case{"awq_gemm_int4_g32_float_down", "awq", 4, 32,
                           "--float-modules=mlp.down_proj",
                           {"model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"}},
                      Case{"ct_pack_int4_g32_ignore", "ct-pack", 4, 32,
                           "--float-modules=self_attn.q_proj,model.layers.0.mlp.gate_proj",
                           {"model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.q_proj",
                            "model.layers.0.mlp.gate_proj"}},
                      Case{"ct_int8_channel_ignore_up", "ct-int", 8, -1,
                           "--sym --float-modules=mlp.up_proj",
                           {"model.layers.0.mlp.up_proj", "model.layers.1.mlp.up_proj"}},
                      // Several config groups: int8 W8A8 attention by a pattern, int4 groups
                      // of 32 for every other linear, 8-bit per channel for two linears named
                      // in full (a name before the "Linear" class), one linear ignored.
                      Case{"ct_mixed_groups", "ct-mixed", 4, 32,
                           "--ct-named=model.layers.1.mlp.down_proj,model.layers.0.self_attn.o_proj"
                           " --float-modules=model.layers.0.mlp.up_proj",
                           {"model.layers.0.mlp.up_proj"}, false,
                           {{"self_attn.q_proj", {8, -1}}, {"self_attn.k_proj", {8, -1}},
                            {"self_attn.v_proj", {8, -1}}, {"model.layers.1.mlp.down_proj", {8, -1}},
                            {"model.layers.0.self_attn.o_proj", {8, -1}}}},
                      // GPTQModel's dynamic: 8-bit groups of 64 for down_proj by a "+:" key,
                      // v_proj skipped by a "-:" key, 4-bit groups of 32 for the rest.
                      Case{"gptq_v2_dynamic_override", "gptq_v2", 4, 32,
                           "--act-order '--gptq-override=.*down_proj:8:64' --gptq-dynamic"
                           " --float-modules=self_attn.v_proj",
                           {"model.layers.0.self_attn.v_proj", "model.layers.1.self_attn.v_proj"},
                           false, {{"mlp.down_proj", {8, 64}}}},
                      Case{"ct_mixed_groups_sym_actorder", "ct-mixed", 4, 64, "--sym --act-order",
                           {}, false,
                           {{"self_attn.q_proj", {8, -1}}, {"self_attn.k_proj", {8, -1}},
                            {"self_attn.v_proj", {8, -1}}}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace placer::model
