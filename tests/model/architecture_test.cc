// The architecture descriptions (loader/architectures) are the one source of what a model
// holds: the loader's expected tensors, the planner's module tree and the run time's block
// specs are derived from them and must agree for every architecture and config flag; and
// every tensor a description lists changes the logits (none is loaded and then ignored).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "loader/architectures/architecture.h"
#include "loader/checkpoint.h"
#include "loader/checkpoint_writer.h"
#include "loader/random_fill.h"
#include "model/causal_lm.h"
#include "runtime/block_spec.h"
#include "placement/model_module_tree.h"

namespace placer::model {
namespace {

namespace fs = std::filesystem;
using loader::CheckpointSpec;

struct FlagCase {
  std::string name;
  std::string arch;
  bool attention_bias = false;
  bool mlp_bias = false;
  bool tied = false;
};

std::ostream& operator<<(std::ostream& out, const FlagCase& c) { return out << c.name; }

CheckpointSpec SpecOf(const FlagCase& c) {
  CheckpointSpec spec = *loader::PresetSpec(c.arch, "tiny");
  spec.layers = 2;
  spec.hidden = 32;
  spec.heads = 4;
  spec.kv_heads = c.arch == "gpt2" ? 4 : 2;
  spec.intermediate = c.arch == "gpt2" ? 128 : 48;
  spec.vocab = 300;
  spec.max_positions = 64;
  spec.attention_bias = c.attention_bias;
  spec.mlp_bias = c.mlp_bias;
  spec.tie_word_embeddings = c.tied;
  return spec;
}

loader::ModelConfig ConfigOf(const FlagCase& c) {
  auto config = loader::ParseModelConfig(loader::ConfigJson(SpecOf(c)).dump(), "config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

class DerivedLists : public ::testing::TestWithParam<FlagCase> {};

TEST_P(DerivedLists, ExpectedTensorsModuleTreeAndBlockSpecsAgree) {
  const loader::ModelConfig config = ConfigOf(GetParam());
  const loader::ArchitectureDescription architecture = loader::DescribeArchitecture(config);

  // Every slot of every block is filled (a slot enum and its description agree).
  std::set<std::string> slot_names;
  for (const loader::TensorDescription* slot : architecture.Slots()) {
    ASSERT_FALSE(slot->name.empty());
    ASSERT_FALSE(slot->shape.empty()) << slot->name;
    EXPECT_TRUE(slot_names.insert(slot->name).second) << slot->name << " listed twice";
  }

  // The loader's and the writer's tensors: the present, untied slots in order.
  std::vector<std::string> expected;
  for (const loader::ExpectedTensor& tensor : loader::ExpectedTensors(config)) {
    expected.push_back(tensor.name);
  }
  std::vector<std::string> stored_slots;
  for (const loader::TensorDescription* slot : architecture.Slots()) {
    if (slot->present && slot->tied_to.empty()) stored_slots.push_back(slot->name);
  }
  EXPECT_EQ(expected, stored_slots);
  const std::set<std::string> expected_set(expected.begin(), expected.end());

  // The module tree: the present slots in execution order, tied ones as groups, decoder
  // layers as no-split modules with a KV cache, embeddings as row lookups.
  auto tree = placement::ModuleTreeSpecForModel(config, {}, /*kv_bytes_per_layer=*/64);
  ASSERT_TRUE(tree.ok()) << tree.status();
  std::vector<std::string> tree_names;
  std::set<std::string> row_lookups;
  for (const placement::TensorSpec& tensor : tree->tensors) {
    tree_names.push_back(tensor.name);
    if (tensor.row_lookup) row_lookups.insert(tensor.name);
  }
  std::vector<std::string> present_slots;
  std::set<std::string> want_row_lookups;
  std::vector<std::vector<std::string>> want_tied;
  std::set<std::string> decoder_layers;
  for (const loader::BlockDescription& block : architecture.blocks) {
    if (block.decoder_layer()) decoder_layers.insert(block.module);
    for (const loader::TensorDescription& slot : block.tensors) {
      if (!slot.present) continue;
      present_slots.push_back(slot.name);
      if (block.row_lookup && slot.tied_to.empty()) want_row_lookups.insert(slot.name);
      if (!slot.tied_to.empty()) want_tied.push_back({slot.tied_to, slot.name});
    }
  }
  EXPECT_EQ(tree_names, present_slots);
  EXPECT_EQ(row_lookups, want_row_lookups);
  EXPECT_EQ(tree->tied, want_tied);
  EXPECT_EQ(want_tied.empty(), !config.tie_word_embeddings);
  EXPECT_EQ(decoder_layers.size(), static_cast<size_t>(config.num_hidden_layers));
  std::set<std::string> kv_modules, classed_modules;
  for (const auto& [module, bytes] : tree->kv_cache_bytes) kv_modules.insert(module);
  for (const auto& [module, module_class] : tree->module_classes) {
    classed_modules.insert(module);
    EXPECT_EQ(module_class, tree->no_split_classes.at(0));
  }
  EXPECT_EQ(kv_modules, decoder_layers);
  EXPECT_EQ(classed_modules, decoder_layers);

  // The same tree from the checkpoint's own listing.
  std::vector<placement::TensorSpec> listed;
  for (const loader::ExpectedTensor& tensor : loader::ExpectedTensors(config)) {
    listed.push_back({tensor.name, tensor.shape, loader::DType::kBF16, false, false});
  }
  auto from_listing = placement::ModuleTreeSpecForModel(config, listed, 64);
  ASSERT_TRUE(from_listing.ok()) << from_listing.status();
  std::vector<std::string> listing_names;
  for (const placement::TensorSpec& tensor : from_listing->tensors) {
    listing_names.push_back(tensor.name);
    EXPECT_EQ(tensor.dtype, loader::DType::kBF16) << tensor.name;
  }
  EXPECT_EQ(listing_names, present_slots);

  // The block specs: one per described block, each slot reading a tensor the loader
  // guarantees, or marked absent exactly when config.json leaves it out.
  const std::vector<runtime::BlockSpec> specs = runtime::BlockSpecsFor(architecture);
  ASSERT_EQ(specs.size(), architecture.blocks.size());
  for (size_t b = 0; b < specs.size(); ++b) {
    const loader::BlockDescription& block = architecture.blocks[b];
    EXPECT_EQ(specs[b].module, block.module);
    EXPECT_EQ(specs[b].row_lookup, block.row_lookup);
    ASSERT_EQ(specs[b].tensors.size(), block.tensors.size()) << block.module;
    for (size_t t = 0; t < block.tensors.size(); ++t) {
      EXPECT_EQ(specs[b].tensors[t].absent, !block.tensors[t].present) << block.tensors[t].name;
      if (!specs[b].tensors[t].absent) {
        EXPECT_EQ(expected_set.count(specs[b].tensors[t].name), 1u)
            << block.module << " reads " << specs[b].tensors[t].name
            << ", which the loader does not require";
      }
    }
  }
}

TEST(DerivedLists, EachFlagAddsExactlyItsTensors) {
  auto count = [](const FlagCase& c) { return loader::ExpectedTensors(ConfigOf(c)).size(); };
  const size_t plain = count({"", "llama"});
  EXPECT_EQ(count({"", "llama", /*attention_bias=*/true}), plain + 2 * 4);  // q, k, v, o
  EXPECT_EQ(count({"", "llama", false, /*mlp_bias=*/true}), plain + 2 * 3);  // gate, up, down
  EXPECT_EQ(count({"", "llama", false, false, /*tied=*/true}), plain - 1);  // lm_head
  EXPECT_EQ(count({"", "qwen2"}), plain + 2 * 3);                            // q, k, v
  EXPECT_EQ(count({"", "gpt2", false, false, true}) + 1, count({"", "gpt2"}));
}

INSTANTIATE_TEST_SUITE_P(
    Flags, DerivedLists,
    ::testing::Values(FlagCase{"llama", "llama"}, FlagCase{"llama_tied", "llama", false, false, true},
                      FlagCase{"llama_attention_bias", "llama", true},
                      FlagCase{"llama_mlp_bias", "llama", false, true},
                      FlagCase{"llama_all_biases_tied", "llama", true, true, true},
                      FlagCase{"mistral_attention_bias", "mistral", true},
                      FlagCase{"qwen2", "qwen2"}, FlagCase{"qwen2_mlp_bias", "qwen2", false, true},
                      FlagCase{"gpt2_tied", "gpt2", false, false, true},
                      FlagCase{"gpt2_untied", "gpt2"}),
    [](const auto& info) { return info.param.name; });

// Rewriting any one tensor of the checkpoint with other values changes the logits: the
// forward pass reads every tensor the description lists.
class EveryTensorMatters : public ::testing::TestWithParam<FlagCase> {};

TEST_P(EveryTensorMatters, ChangingAnyTensorChangesTheLogits) {
  const CheckpointSpec spec = SpecOf(GetParam());
  const fs::path dir =
      fs::temp_directory_path() / absl::StrCat("placer-arch-", getpid(), "-", GetParam().name);
  const std::vector<int32_t> tokens = {1, 17, 250, 5, 99, 42};
  auto logits_with = [&](const std::string& changed) -> std::vector<float> {
    const loader::TensorFillFactory base = loader::MakeRandomFill(7);
    const loader::TensorFillFactory other = loader::MakeRandomFill(8);
    auto written = loader::WriteCheckpoint(
        dir.string(), spec, 1ull << 40,
        [&](const loader::ExpectedTensor& tensor, loader::DType dtype) {
          return tensor.name == changed ? other(tensor, dtype) : base(tensor, dtype);
        });
    EXPECT_TRUE(written.ok()) << written.status();
    auto checkpoint = loader::Checkpoint::Open(dir.string());
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    if (!checkpoint.ok()) return {};
    auto model = LoadCausalLm(*checkpoint);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return {};
    auto logits = (*model)->Forward(tokens, /*all_positions=*/true);
    EXPECT_TRUE(logits.ok()) << logits.status();
    return logits.ok() ? logits->values : std::vector<float>{};
  };
  const std::vector<float> baseline = logits_with("");
  ASSERT_FALSE(baseline.empty());
  // The forward pass is deterministic: a tensor it did not read would leave every logit
  // bit for bit as it was, so any change above rounding shows the tensor is used.
  ASSERT_EQ(logits_with(""), baseline);
  float largest = 0;
  for (float v : baseline) largest = std::max(largest, std::fabs(v));

  const auto config = ConfigOf(GetParam());
  for (const loader::ExpectedTensor& tensor : loader::ExpectedTensors(config)) {
    const std::vector<float> changed = logits_with(tensor.name);
    ASSERT_EQ(changed.size(), baseline.size()) << tensor.name;
    float difference = 0;
    for (size_t i = 0; i < changed.size(); ++i) {
      difference = std::max(difference, std::fabs(changed[i] - baseline[i]));
    }
    EXPECT_GT(difference, 1e-6f * largest) << tensor.name << " does not affect the logits";
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Flags, EveryTensorMatters,
    ::testing::Values(FlagCase{"llama_all_biases", "llama", true, true},
                      FlagCase{"qwen2_mlp_bias", "qwen2", false, true},
                      FlagCase{"gpt2_untied", "gpt2"}, FlagCase{"gpt2_tied", "gpt2", false, false, true}),
    [](const auto& info) { return info.param.name; });

// A checkpoint holding a tensor its config.json leaves out is refused naming it, not loaded
// and ignored.
TEST(Architecture, ABiasTheConfigLeavesOutIsRefusedNamingTheTensor) {
  FlagCase biased{"biased", "llama", true, true};
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("placer-arch-extra-", getpid());
  CheckpointSpec spec = SpecOf(biased);
  ASSERT_TRUE(loader::WriteCheckpoint(dir.string(), spec, 1ull << 40, loader::MakeRandomFill(1)).ok());
  spec.mlp_bias = false;
  std::ofstream(dir / "config.json") << loader::ConfigJson(spec).dump(2);
  auto refused = loader::Checkpoint::Open(dir.string());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("mlp.down_proj.bias\" is in the checkpoint but "
                                            "config.json (LlamaForCausalLM) leaves it out"),
            std::string::npos)
      << refused.status();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace placer::model
