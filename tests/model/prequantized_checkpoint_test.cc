// Pre-quantized checkpoints (GPTQ v1/v2 with and without activation order, AWQ GEMM,
// compressed-tensors pack-quantized and int-quantized; prequantized_fixture.h): every linear
// is repacked, their logits equal the dequantized reference's in F32 and follow it in BF16
// and with int8 activations, decode steps agree alone and batched, a float head packs at load.
// Their layers off the execution device: prequantized_offload_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "loader/architectures/architecture.h"
#include "loader/checkpoint.h"
#include "loader/prequantized_repack.h"
#include "loader/prequantized_tensors.h"
#include "loader/quantized_weight.h"
#include "model/causal_lm.h"
#include "model/quantized_linear.h"
#include "model/quantized_vnni.h"
#include "placement/model_module_tree.h"
#include "tests/model/prequantized_fixture.h"
#include "tests/model/model_checks.h"

namespace placer::model {
namespace {

using namespace prequantized_test;  // NOLINT: the fixture and its cases
using namespace model_checks;  // NOLINT: ExpectLogitsClose, WorstRowRelativeError
using placement::Device;
using runtime::MemoryKind;

class PrequantizedCheckpoint : public PrequantizedFixture {};

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

// The repack itself, weight by weight: each packed weight dequantizes (fma(q, s, m) in
// float32) to the reference's weight, the writer's (q - z)·s rounded once to float32, bit for
// bit, its columns in the order the model gathers its input in (activation order).
TEST_P(PrequantizedCheckpoint, EveryRepackedWeightDequantizesToTheReferenceBitForBit) {
  const loader::ArchitectureDescription arch = loader::DescribeArchitecture(checkpoint_->config());
  int checked = 0;
  for (const loader::TensorDescription* slot : arch.Slots()) {
    const loader::QuantizedLinearSource* source = checkpoint_->QuantizedLinear(slot->name);
    if (source == nullptr) continue;
    absl::StatusOr<at::Tensor> packed = loader::RepackQuantizedLinear(*checkpoint_, *source);
    ASSERT_TRUE(packed.ok()) << packed.status();
    absl::StatusOr<at::Tensor> order = loader::QuantizedInputOrder(*checkpoint_, *source);
    ASSERT_TRUE(order.ok()) << order.status();
    absl::StatusOr<at::Tensor> reference = reference_->ReadTensor(slot->name);
    ASSERT_TRUE(reference.ok()) << reference.status();
    at::Tensor want = reference->to(at::kFloat);
    if (order->defined()) want = want.index_select(1, order->to(at::kLong));
    const at::Tensor got = loader::DequantizeLinearWeight(*packed, at::kFloat);
    ASSERT_EQ(got.sizes(), want.sizes()) << slot->name;
    EXPECT_TRUE(at::equal(got, want))
        << slot->name << ": largest difference " << (got - want).abs().max().item<float>();
    ++checked;
  }
  EXPECT_GT(checked, 0);
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
    ExpectLogitsClose(*got, *want, absl::StrCat(length, " tokens"));
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
    const double worst = WorstRowRelativeError(*got, *want);
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
  if (!Int8ActivationKernelRuns()) GTEST_SKIP() << "this CPU lacks AVX2";
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
  const double worst = WorstRowRelativeError(*got, *want);
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
    ExpectLogitsClose(*got, *want, absl::StrCat(prompt.size(), " tokens, lm_head int8"));
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
  ExpectLogitsClose(*logits, *quantized->Forward(prompt_, true), "lm_head int8 on cuda:0");
}

INSTANTIATE_TEST_SUITE_P(Formats, PrequantizedCheckpoint, ::testing::ValuesIn(PrequantizedCases()),
                         CaseName);

}  // namespace
}  // namespace placer::model
