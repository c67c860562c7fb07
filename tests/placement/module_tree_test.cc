#include "placement/module_tree.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loader/architectures/architecture.h"
#include "loader/model_config.h"
#include "placement/model_module_tree.h"
#include "placement/module_tree_json.h"
#include "placement/reserves.h"
#include "tests/placement/test_trees.h"

namespace placer::placement {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::BuildTree;
using testing::Bytes;

std::vector<std::string> TensorNames(const ModuleTree& tree) {
  std::vector<std::string> names;
  for (const auto& tensor : tree.tensors()) names.push_back(tensor.name);
  return names;
}

TEST(DottedPrefixTest, IsAPrefixTestNotASubstringTest) {
  EXPECT_TRUE(IsDottedPrefix("model.layers.1", "model.layers.1.mlp.weight"));
  EXPECT_TRUE(IsDottedPrefix("model.layers.1", "model.layers.1"));
  EXPECT_FALSE(IsDottedPrefix("model.layers.1", "model.layers.10.mlp.weight"));
  EXPECT_FALSE(IsDottedPrefix("layers.1", "model.layers.1.mlp.weight"));
  EXPECT_TRUE(IsDottedPrefix("", "anything"));
}

TEST(ModuleTreeTest, ModulesInOrderOfFirstAppearanceAndSubtreesContiguous) {
  ModuleTreeSpec spec;
  spec.tensors = {Bytes("a.x", 1), Bytes("b.y", 2), Bytes("a.z", 4), Bytes("top", 8)};
  const ModuleTree tree = BuildTree(spec);
  EXPECT_THAT(TensorNames(tree), ElementsAre("a.x", "a.z", "b.y", "top"));
  const auto& a = tree.modules()[*tree.FindModule("a")];
  EXPECT_EQ(a.bytes, 5u);
  EXPECT_EQ(a.tensor_end - a.tensor_begin, 2);
  EXPECT_EQ(tree.total_bytes(), 15u);
  EXPECT_FALSE(tree.FindModule("top").has_value());
}

TEST(ModuleTreeTest, SizesInTheComputeDtype) {
  ModuleTreeSpec spec;
  spec.tensors = {{"w", {4, 4}, loader::DType::kF32, false},
                  {"ids", {4}, loader::DType::kI64, true}};
  absl::StatusOr<ModuleTree> tree = ModuleTree::Build(spec, loader::DType::kBF16);
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_EQ(tree->tensors()[0].bytes, 32u);  // 16 x 2: floating tensors converted
  EXPECT_EQ(tree->tensors()[1].bytes, 32u);  // 4 x 8: integers keep their dtype
}

TEST(ModuleTreeTest, ErrorsNameTheTensorOrModule) {
  auto error = [](ModuleTreeSpec spec) {
    return std::string(ModuleTree::Build(spec, std::nullopt).status().message());
  };
  ModuleTreeSpec twice;
  twice.tensors = {Bytes("a.w", 1), Bytes("a.w", 1)};
  EXPECT_THAT(error(twice), HasSubstr("tensor 'a.w' is listed twice"));
  ModuleTreeSpec both;
  both.tensors = {Bytes("a", 1), Bytes("a.w", 1)};
  EXPECT_THAT(error(both), HasSubstr("tensor 'a' is also a module"));
  ModuleTreeSpec empty_part;
  empty_part.tensors = {Bytes("a..w", 1)};
  EXPECT_THAT(error(empty_part), HasSubstr("tensor 'a..w': empty component"));
  ModuleTreeSpec bad_class;
  bad_class.tensors = {Bytes("a.w", 1)};
  bad_class.module_classes["a.w"] = "Linear";
  EXPECT_THAT(error(bad_class), HasSubstr("module_classes: 'a.w' is a tensor of the tree"));
  bad_class.module_classes = {{"a.w.inner", "Dropout"}};
  EXPECT_THAT(error(bad_class), HasSubstr("'a.w.inner' lies under 'a.w', which is a tensor"));
  bad_class.module_classes = {{"a..act", "SiLU"}};
  EXPECT_THAT(error(bad_class), HasSubstr("'a..act': empty component"));
  ModuleTreeSpec bad_tie;
  bad_tie.tensors = {Bytes("a.w", 1), Bytes("b.w", 2)};
  bad_tie.tied = {{"a.w", "c.w"}};
  EXPECT_THAT(error(bad_tie), HasSubstr("no tensor 'c.w'"));
  bad_tie.tied = {{"a.w", "b.w"}};
  EXPECT_THAT(error(bad_tie), HasSubstr("different number of elements"));
  EXPECT_THAT(error(ModuleTreeSpec{}), HasSubstr("no tensors"));
}

// named_modules() dumps list dropout, activations and rotary embeddings, which own no tensor.
TEST(ModuleTreeTest, ModulesWithoutTensorsAreAcceptedAndTakeNoRoom) {
  ModuleTreeSpec spec;
  spec.tensors = {Bytes("model.layers.0.mlp.up.weight", 8), Bytes("model.layers.0.attn.q.weight", 4)};
  spec.module_classes = {{"model.layers.0", "Layer"},
                         {"model.layers.0.mlp.act_fn", "SiLU"},
                         {"model.layers.0.attn.rotary_emb", "LlamaRotaryEmbedding"},
                         {"model.dropout", "Dropout"}};
  spec.no_split_classes = {"Layer", "Dropout"};
  absl::StatusOr<ModuleTree> tree = ModuleTree::Build(spec, std::nullopt);
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_THAT(tree->parameterless_modules(),
              ElementsAre("model.dropout", "model.layers.0.attn.rotary_emb",
                          "model.layers.0.mlp.act_fn"));
  EXPECT_FALSE(tree->FindModule("model.dropout").has_value());
  EXPECT_TRUE(tree->modules()[*tree->FindModule("model.layers.0")].no_split);
  EXPECT_EQ(tree->total_bytes(), 12u);
}

TEST(ModuleTreeJsonTest, ParsesTheIssueSchema) {
  absl::StatusOr<ModuleTreeSpec> spec = ParseModuleTreeJson(R"({
    "tensors": [{"name": "model.layers.0.mlp.up_proj.weight", "shape": [11008, 4096], "dtype": "BF16"},
                {"name": "model.layers.0.running_mean", "shape": [4096], "dtype": "F32", "buffer": true},
                {"name": "model.embed_tokens.weight", "shape": [32000, 4096], "dtype": "BF16"},
                {"name": "lm_head.weight", "shape": [32000, 4096], "dtype": "BF16"}],
    "module_classes": {"model.layers.0": "LlamaDecoderLayer"},
    "no_split": ["LlamaDecoderLayer"],
    "tied": [["lm_head.weight", "model.embed_tokens.weight"]]})",
                                                            "tree.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tensors.size(), 4u);
  EXPECT_TRUE(spec->tensors[1].is_buffer);
  EXPECT_EQ(spec->tensors[0].dtype, loader::DType::kBF16);
  EXPECT_EQ(spec->module_classes.at("model.layers.0"), "LlamaDecoderLayer");
  const ModuleTree tree = BuildTree(*spec);
  EXPECT_TRUE(tree.modules()[*tree.FindModule("model.layers.0")].no_split);
  EXPECT_EQ(tree.total_bytes(), (11008ull * 4096 + 32000ull * 4096) * 2 + 4096 * 4);
}

TEST(ModuleTreeJsonTest, StrictErrorsNameTheField) {
  auto error = [](const std::string& json) {
    return std::string(ParseModuleTreeJson(json, "t.json").status().message());
  };
  EXPECT_THAT(error("nope"), HasSubstr("t.json: not valid JSON"));
  EXPECT_THAT(error(R"({"tensors": []})"), HasSubstr("t.json: tensors: lists no tensors"));
  EXPECT_THAT(error(R"({"tensors": [{"name": "w", "shape": [1], "dtype": "F32"}], "extra": 1})"),
              HasSubstr("t.json: extra: unknown field"));
  EXPECT_THAT(error(R"({"tensors": [{"name": "w", "shape": [-1], "dtype": "F32"}]})"),
              HasSubstr("t.json: tensors[0].shape[0]: must not be negative, got -1 (tensor 'w')"));
  EXPECT_THAT(error(R"({"tensors": [{"name": "w", "shape": [1], "dtype": "F33"}]})"),
              HasSubstr("t.json: tensors[0].dtype: "));
  EXPECT_THAT(error(R"({"tensors": [{"name": "w", "shape": [1], "dtype": "F33"}]})"),
              HasSubstr("(tensor 'w')"));
  EXPECT_THAT(error(R"({"tensors": [{"name": "w", "shape": [1], "dtype": "F32", "bufer": true}]})"),
              HasSubstr("t.json: tensors[0].bufer: unknown field"));
  EXPECT_THAT(error(R"({"tensors": [{"shape": [1], "dtype": "F32"}]})"),
              HasSubstr("t.json: tensors[0].name: missing"));
  EXPECT_THAT(error(R"({"tensors": [{"name": "w", "shape": [1], "dtype": "F32"}], "tied": [["w", 3]]})"),
              HasSubstr("t.json: tied[0][1]: expected a string, got number"));
  EXPECT_THAT(error(R"({"tensors": [{"name": "w", "shape": [1], "dtype": "F32"}], "no_split": "X"})"),
              HasSubstr("t.json: no_split: expected an array, got string"));
}

loader::ModelConfig LlamaConfig(bool tied) {
  auto config = loader::ParseModelConfig(
      absl::StrCat(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
          "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
          "max_position_embeddings": 256, "torch_dtype": "bfloat16",
          "tie_word_embeddings": )", tied ? "true" : "false", "}"),
      "config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

TEST(ModelModuleTreeTest, LlamaLayersAreNoSplitWithKvAndTiedHeadCountedOnce) {
  const loader::ModelConfig config = LlamaConfig(/*tied=*/true);
  absl::StatusOr<ModuleTreeSpec> spec = ModuleTreeSpecForModel(config, {}, 77);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const ModuleTree tree = BuildTree(*spec);
  const auto& layer = tree.modules()[*tree.FindModule("model.layers.1")];
  EXPECT_TRUE(layer.no_split);
  EXPECT_EQ(layer.class_name, "LlamaDecoderLayer");
  EXPECT_EQ(layer.kv_cache_bytes, 77u);
  ASSERT_TRUE(tree.FindTensor("lm_head.weight").has_value());
  EXPECT_FALSE(tree.tensors()[*tree.FindTensor("lm_head.weight")].counted);
  EXPECT_EQ(tree.tensors().back().name, "lm_head.weight");
  EXPECT_EQ(tree.tensors().front().name, "model.embed_tokens.weight");
  EXPECT_EQ(tree.tensors().front().bytes, 100u * 64 * 2);  // bf16 from torch_dtype
  // The embedding is looked up when offloaded; its tied lm_head copy and the layers are staged.
  EXPECT_TRUE(tree.tensors().front().row_lookup);
  EXPECT_FALSE(tree.tensors()[*tree.FindTensor("lm_head.weight")].row_lookup);
  EXPECT_FALSE(tree.tensors()[*tree.FindTensor("model.layers.1.mlp.up_proj.weight")].row_lookup);
}

TEST(ModelModuleTreeTest, Gpt2CheckpointNamesAreCanonicalAndOrdered) {
  auto config = loader::ParseModelConfig(
      R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 8,
          "n_layer": 2, "n_head": 2, "vocab_size": 10, "n_positions": 16})",
      "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  std::vector<TensorSpec> checkpoint;
  for (const auto& tensor : loader::ExpectedTensors(*config)) {
    std::string name = tensor.name;
    if (name.rfind("transformer.", 0) == 0) name = name.substr(12);  // Hub-style names
    checkpoint.insert(checkpoint.begin(), TensorSpec{name, tensor.shape, loader::DType::kF32, false});
  }
  checkpoint.push_back({"h.0.attn.bias", {1, 1, 16, 16}, loader::DType::kF32, true});
  absl::StatusOr<ModuleTreeSpec> spec = ModuleTreeSpecForModel(*config, checkpoint, 0);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const ModuleTree tree = BuildTree(*spec);
  EXPECT_EQ(tree.tensors().front().name, "transformer.wte.weight");
  EXPECT_FALSE(tree.FindTensor("transformer.h.0.attn.bias").has_value());
  EXPECT_TRUE(tree.modules()[*tree.FindModule("transformer.h.1")].no_split);
  EXPECT_EQ(tree.tied_groups().size(), 1u);  // GPT-2 ties lm_head to wte

  checkpoint.erase(checkpoint.begin());  // drop one tensor: the error names it
  EXPECT_THAT(ModuleTreeSpecForModel(*config, checkpoint, 0).status().message(),
              HasSubstr("checkpoint lacks tensor"));
}

TEST(ReservesTest, KvCacheIsExactlyTwoKvHeadsHeadDimBytesTokens) {
  loader::ModelConfig config = LlamaConfig(false);
  config.num_key_value_heads = 8;
  config.head_dim = 128;
  EXPECT_EQ(KvCacheBytesPerLayer(config, {4096, 2}, loader::DType::kBF16),
            2ull * 8 * 128 * 2 * 4096 * 2);
  EXPECT_EQ(KvCacheBytesPerLayer(config, {0, 2}, loader::DType::kBF16), 0u);
}

TEST(ReservesTest, KvCacheIsWholeBlocksOfSixteenPositions) {
  loader::ModelConfig config = LlamaConfig(false);
  config.num_key_value_heads = 2;
  config.head_dim = 16;
  const std::uint64_t per_position = 2 * 2 * 16 * 4;  // K and V, F32
  // Each sequence rounds up to whole blocks: 100 positions take 7 blocks (112).
  EXPECT_EQ(KvCacheBlocks({100, 3}), 21);
  EXPECT_EQ(KvCacheBytesPerLayer(config, {100, 3}, loader::DType::kF32), per_position * 112 * 3);
  // A shared total sizes the pool on its own, but never below one longest sequence.
  EXPECT_EQ(KvCacheBlocks({100, 3, 1000}), 63);
  EXPECT_EQ(KvCacheBlocks({100, 64, 160}), 10);
  EXPECT_EQ(KvCacheBlocks({100, 64, 50}), 7);
  EXPECT_EQ(KvCacheBytesPerLayer(config, {100, 64, 160}, loader::DType::kF32), per_position * 160);
  // A window on every layer: a sequence holds one window's blocks (20 positions: 2 blocks).
  EXPECT_EQ(KvCacheBlocks({100, 3}, 20), 6);
  EXPECT_EQ(KvCacheBlocks({100, 3}, 4096), 21) << "a window longer than the sequence";
  loader::ModelConfig windowed = config;
  windowed.architecture = loader::Architecture::kMistral;
  windowed.sliding_window = 20;
  EXPECT_EQ(KvCacheBytesPerLayer(windowed, {100, 3}, loader::DType::kF32), per_position * 32 * 3);
}

TEST(ReservesTest, ActivationReserveFollowsTheDocumentedFormula) {
  const loader::ModelConfig config = LlamaConfig(false);  // H 64, I 128, 4 heads, 2 kv, hd 16
  const std::uint64_t tokens = 2 * 32;
  const std::uint64_t layer = tokens * (4 * 64 + std::max<std::uint64_t>((4 + 4) * 16, 3 * 128)) * 2 +
                              2ull * 2 * 4 * 32 * 32 * 4;
  const std::uint64_t logits = 2ull * 100 * (2 + 4);
  EXPECT_EQ(ActivationReserveBytes(config, {32, 2}, loader::DType::kBF16),
            std::max(layer, logits));
}

}  // namespace
}  // namespace placer::placement
