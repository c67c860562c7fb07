// --quantize in the planner: decoder layers' linear weights sized by their packed bytes (int8
// per channel, int4 in groups), everything else at the compute dtype; GPT-2's Conv1D weights
// packed transposed; shapes a scheme cannot pack refused naming the tensor; --module-tree
// with --quantize refused.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "loader/model_config.h"
#include "placement/model_module_tree.h"
#include "placement/plan_command.h"
#include "placement/reserves.h"

namespace placer::placement {
namespace {

loader::ModelConfig Config(const std::string& arch_json) {
  auto config = loader::ParseModelConfig(arch_json, "config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

const char kLlama[] = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
    "max_position_embeddings": 256, "torch_dtype": "bfloat16"})";

ModuleTree Tree(const absl::StatusOr<ModuleTreeSpec>& spec, loader::DType dtype) {
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<ModuleTree> tree = ModuleTree::Build(*spec, dtype);
  EXPECT_TRUE(tree.ok()) << tree.status();
  return *std::move(tree);
}

uint64_t BytesOf(const ModuleTree& tree, const std::string& name) {
  return tree.tensors()[*tree.FindTensor(name)].bytes;
}

TEST(QuantizedTree, LinearWeightsAreSizedPackedAndTheRestAtTheirDtype) {
  const loader::ModelConfig config = Config(kLlama);
  for (const auto& [scheme, group] : std::vector<std::pair<std::string, int64_t>>{
           {"int8", 0}, {"int4", 32}, {"int4", 128}}) {
    SCOPED_TRACE(absl::StrCat(scheme, " ", group));
    const loader::QuantizeOptions options = *loader::ParseQuantizeOptions(scheme, group);
    absl::StatusOr<ModuleTreeSpec> spec = ModuleTreeSpecForModel(config, {}, 0, options);
    ASSERT_TRUE(spec.ok()) << spec.status();
    const ModuleTree tree = Tree(*spec, loader::DType::kBF16);
    const int64_t g = group == 0 ? 256 : group;  // down_proj's 256 inputs per channel
    const uint64_t block = 8 + (scheme == "int8" ? g : g / 2);
    // down_proj: [128 out, 256 in]; q_proj [128, 128] (int8 per channel: groups of 128).
    EXPECT_EQ(BytesOf(tree, "model.layers.0.mlp.down_proj.weight"), 128u * (256 / g) * block);
    const int64_t gq = group == 0 ? 128 : group;
    EXPECT_EQ(BytesOf(tree, "model.layers.1.self_attn.q_proj.weight"),
              128u * (128 / gq) * (8 + (scheme == "int8" ? gq : gq / 2)));
    EXPECT_EQ(BytesOf(tree, "model.embed_tokens.weight"), 100u * 128 * 2);
    EXPECT_EQ(BytesOf(tree, "lm_head.weight"), 100u * 128 * 2);
    EXPECT_EQ(BytesOf(tree, "model.layers.0.input_layernorm.weight"), 128u * 2);
  }
  // Without --quantize nothing changes.
  const ModuleTree plain = Tree(ModuleTreeSpecForModel(config, {}, 0), loader::DType::kBF16);
  EXPECT_EQ(BytesOf(plain, "model.layers.0.mlp.down_proj.weight"), 128u * 256 * 2);
}

TEST(QuantizedTree, QuantizeLmHeadSizesTheHeadPackedTiedOrNot) {
  const loader::ModelConfig config = Config(kLlama);
  for (const auto& [head, block] : std::vector<std::pair<std::string, uint64_t>>{
           {"int8", 8 + 128}, {"int4", 8 + 64}}) {
    SCOPED_TRACE(head);
    const loader::QuantizeOptions options = *loader::ParseQuantizeOptions("int4", 32, head);
    const ModuleTree tree = Tree(ModuleTreeSpecForModel(config, {}, 0, options), loader::DType::kBF16);
    // lm_head [100, 128]: int8 one scale per output (groups of 128), int4 groups of 128,
    // whatever the layers' group size; the embedding stays BF16.
    EXPECT_EQ(BytesOf(tree, "lm_head.weight"), 100u * block);
    EXPECT_EQ(BytesOf(tree, "model.embed_tokens.weight"), 100u * 128 * 2);
    EXPECT_EQ(BytesOf(tree, "model.layers.0.mlp.down_proj.weight"), 128u * (256 / 32) * (8 + 16));
  }
  std::string tied_json = kLlama;
  tied_json.insert(tied_json.size() - 1, R"(, "tie_word_embeddings": true)");
  // Tied: one table [100, 128] for the lookup and the head, packed int8 (counted once, on
  // the embedding); without --quantize-lm-head it keeps the compute dtype.
  const ModuleTree tied = Tree(ModuleTreeSpecForModel(Config(tied_json), {}, 0,
                                                      *loader::ParseQuantizeOptions("int4", 0, "int8")),
                               loader::DType::kBF16);
  EXPECT_EQ(BytesOf(tied, "model.embed_tokens.weight"), 100u * (8 + 128));
  EXPECT_EQ(BytesOf(tied, "lm_head.weight"), 100u * (8 + 128));
  EXPECT_FALSE(tied.tensors()[*tied.FindTensor("lm_head.weight")].counted)
      << "a tied head shares the table's storage";
  const ModuleTree tied_unpacked = Tree(
      ModuleTreeSpecForModel(Config(tied_json), {}, 0, *loader::ParseQuantizeOptions("int4", 0)),
      loader::DType::kBF16);
  EXPECT_EQ(BytesOf(tied_unpacked, "model.embed_tokens.weight"), 100u * 128 * 2);
  // Alone, the flag packs the head and nothing else.
  absl::StatusOr<loader::QuantizeOptions> alone = loader::ParseQuantizeOptions("none", 0, "int8");
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_FALSE(alone->enabled());
  EXPECT_TRUE(alone->packs_any());
  EXPECT_EQ(loader::DescribeQuantizeOptions(*alone), "lm_head int8 (one scale per output channel)");
  const ModuleTree head_only = Tree(ModuleTreeSpecForModel(config, {}, 0, *alone), loader::DType::kBF16);
  EXPECT_EQ(BytesOf(head_only, "lm_head.weight"), 100u * (8 + 128));
  EXPECT_EQ(BytesOf(head_only, "model.layers.0.mlp.down_proj.weight"), 128u * 256 * 2);
  EXPECT_EQ(BytesOf(head_only, "model.embed_tokens.weight"), 100u * 128 * 2);
  const ModuleTree tied_head_only = Tree(
      ModuleTreeSpecForModel(Config(tied_json), {}, 0, *alone), loader::DType::kBF16);
  EXPECT_EQ(BytesOf(tied_head_only, "model.embed_tokens.weight"), 100u * (8 + 128));
  EXPECT_EQ(BytesOf(tied_head_only, "model.layers.0.self_attn.q_proj.weight"), 128u * 128 * 2);
  // A wrong value names the flag.
  absl::StatusOr<loader::QuantizeOptions> bad = loader::ParseQuantizeOptions("int8", 0, "int2");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--quantize-lm-head 'int2'"), std::string::npos);
}

TEST(QuantizedTree, Gpt2Conv1DWeightsArePackedTransposed) {
  const loader::ModelConfig config = Config(R"({"architectures": ["GPT2LMHeadModel"],
      "model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 2, "vocab_size": 10,
      "n_positions": 16})");
  const loader::QuantizeOptions int4 = *loader::ParseQuantizeOptions("int4", 32);
  const ModuleTree tree =
      Tree(ModuleTreeSpecForModel(config, {}, 0, int4), loader::DType::kF32);
  // c_fc stores [64 in, 256 out]: 256 rows of 64 / 32 blocks of 8 + 16 bytes.
  EXPECT_EQ(BytesOf(tree, "transformer.h.0.mlp.c_fc.weight"), 256u * 2 * 24);
  // c_proj [256 in, 64 out].
  EXPECT_EQ(BytesOf(tree, "transformer.h.0.mlp.c_proj.weight"), 64u * 8 * 24);
  EXPECT_EQ(BytesOf(tree, "transformer.h.0.attn.c_attn.bias"), 192u * 4);
}

TEST(QuantizedTree, ShapesTheSchemeCannotPackAreRefusedNamingTheTensor) {
  const loader::ModelConfig config = Config(R"({"architectures": ["LlamaForCausalLM"],
      "model_type": "llama", "hidden_size": 96, "intermediate_size": 160,
      "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 100})");
  const loader::QuantizeOptions g128 = *loader::ParseQuantizeOptions("int4", 128);
  absl::StatusOr<ModuleTreeSpec> spec = ModuleTreeSpecForModel(config, {}, 0, g128);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("model.layers.0.self_attn.q_proj.weight"),
            std::string::npos)
      << spec.status();
  EXPECT_NE(spec.status().message().find("does not divide the 96 inputs"), std::string::npos)
      << spec.status();
}

TEST(QuantizedTree, TheActivationReserveHoldsTheLargestPackedWeightDequantized) {
  const loader::ModelConfig config = Config(kLlama);
  EXPECT_EQ(DequantizedWeightReserveBytes(config, false, false, loader::DType::kBF16), 0u);
  // gate/up/down: 256 x 128, the largest of the layer's linear weights.
  EXPECT_EQ(DequantizedWeightReserveBytes(config, true, false, loader::DType::kBF16), 256u * 128 * 2);
  EXPECT_EQ(DequantizedWeightReserveBytes(config, true, false, loader::DType::kF32), 256u * 128 * 4);
  // A packed lm_head counts too: [100, 128] here, smaller than gate/up/down...
  EXPECT_EQ(DequantizedWeightReserveBytes(config, true, true, loader::DType::kF32), 256u * 128 * 4);
  EXPECT_EQ(DequantizedWeightReserveBytes(config, false, true, loader::DType::kF32), 100u * 128 * 4);
  // ...and the largest weight by far with a real vocabulary.
  std::string large_vocab = kLlama;
  const std::string small_vocab = "\"vocab_size\": 100";
  large_vocab.replace(large_vocab.find(small_vocab), small_vocab.size(), "\"vocab_size\": 32000");
  EXPECT_EQ(DequantizedWeightReserveBytes(Config(large_vocab), true, true, loader::DType::kBF16),
            32000u * 128 * 2);
}

TEST(QuantizedTree, AModuleTreeCannotBeQuantized) {
  PlanCommandArgs args;
  args.module_tree_path = "/nonexistent/tree.json";
  args.placement.quantize = "int4";
  absl::StatusOr<Plan> plan = BuildPlan(args);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("--quantize and --quantize-lm-head need a checkpoint"),
            std::string::npos)
      << plan.status();
  args.placement.quantize = "none";
  args.placement.quantize_lm_head = "int8";
  plan = BuildPlan(args);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("--quantize-lm-head need a checkpoint"), std::string::npos)
      << plan.status();
}

}  // namespace
}  // namespace placer::placement
