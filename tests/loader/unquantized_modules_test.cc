// Each tool's rule for the linears it leaves unquantized, applied to full module names as
// transformers, optimum, GPTQModel and compressed-tensors apply theirs (loader/unquantized_modules.h).
#include "loader/unquantized_modules.h"

#include <gtest/gtest.h>

#include <string>

#include "loader/prequantized_config.h"

namespace placer::loader {
namespace {

using nlohmann::json;

constexpr JsonWhere kWhere{"config.json", "quantization_config.field"};

TEST(UnquantizedModules, AwqSkipsEveryNameContainingAnEntry) {
  auto modules = UnquantizedModules::FromAwqNotConverted(json::array({"down_proj", "layers.1."}), kWhere);
  ASSERT_TRUE(modules.ok()) << modules.status();
  EXPECT_TRUE(modules->Covers("model.layers.0.mlp.down_proj"));
  EXPECT_TRUE(modules->Covers("model.layers.1.self_attn.q_proj"));
  // transformers' substring test: layer 11 contains "layers.1" but not "layers.1.".
  EXPECT_FALSE(modules->Covers("model.layers.11.self_attn.q_proj"));
  EXPECT_FALSE(modules->Covers("model.layers.0.mlp.up_proj"));
  EXPECT_EQ(modules->description(), R"(quantization_config.field ["down_proj","layers.1."])");
}

TEST(UnquantizedModules, GptqQuantizesOnlyNamesEndingInAListedModule) {
  auto modules = UnquantizedModules::FromGptqBlockModules(
      json::array({json::array({"self_attn.q_proj", "self_attn.k_proj"}), "mlp.up_proj"}), kWhere);
  ASSERT_TRUE(modules.ok()) << modules.status();
  EXPECT_FALSE(modules->Covers("model.layers.3.self_attn.q_proj"));
  EXPECT_FALSE(modules->Covers("model.layers.3.mlp.up_proj"));
  EXPECT_TRUE(modules->Covers("model.layers.3.self_attn.v_proj"));
  EXPECT_TRUE(modules->Covers("model.layers.3.mlp.down_proj"));
  // An empty list quantizes nothing.
  auto none = UnquantizedModules::FromGptqBlockModules(json::array(), kWhere);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->Covers("model.layers.0.self_attn.q_proj"));
}

TEST(UnquantizedModules, GptqModelDynamicNegativeKeysMatchFromTheStart) {
  auto modules = UnquantizedModules::FromGptqDynamic(
      {{"-:.*\\.mlp\\.down_proj$", json::object()}, {"-:model\\.layers\\.2\\.", json::object()},
       {"+:.*q_proj", json::object()}},
      kWhere);
  ASSERT_TRUE(modules.ok()) << modules.status();
  EXPECT_TRUE(modules->Covers("model.layers.0.mlp.down_proj"));
  EXPECT_TRUE(modules->Covers("model.layers.2.self_attn.q_proj"));
  EXPECT_FALSE(modules->Covers("model.layers.0.self_attn.q_proj"));  // "+:" without overrides
  // re.match anchors at the start only: "layers\.2\." does not match inside the name.
  auto inside = UnquantizedModules::FromGptqDynamic({{"-:layers\\.2\\.", json::object()}}, kWhere);
  ASSERT_TRUE(inside.ok());
  EXPECT_FALSE(inside->Covers("model.layers.2.self_attn.q_proj"));
}

TEST(UnquantizedModules, CompressedTensorsIgnoreIsExactNamesOrPatterns) {
  auto modules = UnquantizedModules::FromCompressedTensorsIgnore(
      json::array({"lm_head", "model.layers.0.mlp.gate_proj", "re:.*self_attn\\.o_proj$"}), kWhere);
  ASSERT_TRUE(modules.ok()) << modules.status();
  EXPECT_TRUE(modules->Covers("model.layers.0.mlp.gate_proj"));
  EXPECT_FALSE(modules->Covers("model.layers.10.mlp.gate_proj"));  // exact, not a prefix
  EXPECT_TRUE(modules->Covers("model.layers.7.self_attn.o_proj"));
  EXPECT_FALSE(modules->Covers("model.layers.7.self_attn.o_proj_extra"));
  auto lm_head_only = UnquantizedModules::FromCompressedTensorsIgnore(json::array({"lm_head"}), kWhere);
  ASSERT_TRUE(lm_head_only.ok());
  EXPECT_TRUE(lm_head_only->description().empty()) << "every such checkpoint ignores lm_head";
  auto every = UnquantizedModules::FromCompressedTensorsIgnore(json::array({"Linear"}), kWhere);
  ASSERT_TRUE(every.ok());
  EXPECT_TRUE(every->Covers("model.layers.0.self_attn.q_proj"));
}

TEST(UnquantizedModules, BadEntriesAreErrorsNamingThem) {
  const auto message = [](const absl::Status& status) { return std::string(status.message()); };
  auto not_list = UnquantizedModules::FromAwqNotConverted(json("q_proj"), kWhere);
  EXPECT_NE(message(not_list.status()).find("quantization_config.field"), std::string::npos);
  auto empty_name = UnquantizedModules::FromCompressedTensorsIgnore(json::array({""}), kWhere);
  EXPECT_NE(message(empty_name.status()).find("quantization_config.field[0]"), std::string::npos);
  auto backreference = UnquantizedModules::FromCompressedTensorsIgnore(json::array({"re:(a)\\1"}), kWhere);
  ASSERT_FALSE(backreference.ok());
  EXPECT_NE(message(backreference.status()).find("(a)\\1"), std::string::npos);
  auto dynamic_not_object = UnquantizedModules::FromGptqDynamic(json::array(), kWhere);
  EXPECT_FALSE(dynamic_not_object.ok());
}

// Patterns are outside bytes: one that backtracks exponentially in Python's re runs in linear
// time here (RE2), on a name longer than any real one.
TEST(UnquantizedModules, PathologicalPatternsDoNotHang) {
  auto modules = UnquantizedModules::FromCompressedTensorsIgnore(json::array({"re:(a|aa)*(a|aa)*b"}), kWhere);
  ASSERT_TRUE(modules.ok()) << modules.status();
  EXPECT_FALSE(modules->Covers(std::string(5000, 'a')));
}

TEST(UnquantizedModules, EachFormatReadsItsOwnField) {
  auto awq = ParsePrequantizedFormat({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128},
                                      {"zero_point", true}, {"version", "gemm"},
                                      {"modules_to_not_convert", {"mlp.down_proj"}}},
                                     "config.json", "quantization_config");
  ASSERT_TRUE(awq.ok()) << awq.status();
  EXPECT_TRUE(awq->unquantized.Covers("model.layers.4.mlp.down_proj"));
  EXPECT_FALSE(awq->unquantized.Covers("model.layers.4.mlp.up_proj"));
  auto gptq = ParsePrequantizedFormat(
      {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128},
       {"modules_in_block_to_quantize", {{"self_attn.q_proj"}, {"mlp.down_proj"}}},
       {"dynamic", {{"-:model\\.layers\\.0\\.", json::object()}}}},
      "config.json", "quantization_config");
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  EXPECT_FALSE(gptq->unquantized.Covers("model.layers.1.self_attn.q_proj"));
  EXPECT_TRUE(gptq->unquantized.Covers("model.layers.0.self_attn.q_proj"));  // dynamic
  EXPECT_TRUE(gptq->unquantized.Covers("model.layers.1.self_attn.k_proj"));  // not listed
  auto plain = ParsePrequantizedFormat({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}},
                                       "config.json", "quantization_config");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->unquantized.empty());
  EXPECT_FALSE(plain->unquantized.Covers("model.layers.1.self_attn.k_proj"));
}

// Several formats: a linear named by a group (full name or pattern) takes it before the group
// targeting "Linear"; a linear no group targets, or one ignored, is float; GPTQModel's "+:"
// overrides over the base format, its "-:" keys first.
TEST(UnquantizedModules, EachLinearTakesItsConfigGroupsFormat) {
  const json weights4 = {{"num_bits", 4}, {"strategy", "group"}, {"group_size", 32}};
  const json weights8 = {{"num_bits", 8}, {"strategy", "channel"}};
  auto ct = ParsePrequantizedFormat(
      {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"},
       {"ignore", {"model.layers.0.mlp.up_proj"}},
       {"config_groups",
        {{"a", {{"targets", {"Linear"}}, {"weights", weights4}}},
         {"b", {{"targets", {"re:.*down_proj$", "model.layers.1.self_attn.q_proj"}},
                {"weights", weights8}}}}}},
      "config.json", "quantization_config");
  ASSERT_TRUE(ct.ok()) << ct.status();
  ASSERT_EQ(ct->groups.size(), 2u);
  const auto bits_of = [](const PrequantizedFormat& format, const std::string& module) {
    absl::StatusOr<const PrequantizedFormat*> of = format.ForModule(module);
    EXPECT_TRUE(of.ok()) << of.status();
    return !of.ok() || *of == nullptr ? 0 : (*of)->bits;
  };
  EXPECT_EQ(bits_of(*ct, "model.layers.0.mlp.down_proj"), 8);
  EXPECT_EQ(bits_of(*ct, "model.layers.1.self_attn.q_proj"), 8);
  EXPECT_EQ(bits_of(*ct, "model.layers.0.self_attn.q_proj"), 4);
  EXPECT_EQ(bits_of(*ct, "model.layers.0.mlp.up_proj"), 0);  // ignored
  EXPECT_EQ(ct->WhyFloat("model.layers.0.mlp.up_proj").rfind("quantization_config.ignore", 0), 0u);
  EXPECT_EQ(ct->WhyFloat("model.layers.1.mlp.up_proj"), "");
  // Without a "Linear" group, an untargeted linear is float, and says why.
  auto only_b = ParsePrequantizedFormat(
      {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"},
       {"config_groups", {{"b", {{"targets", {"re:.*down_proj$"}}, {"weights", weights8}}}}}},
      "config.json", "quantization_config");
  ASSERT_TRUE(only_b.ok()) << only_b.status();
  EXPECT_EQ(bits_of(*only_b, "model.layers.0.mlp.down_proj"), 8);
  EXPECT_EQ(bits_of(*only_b, "model.layers.0.mlp.gate_proj"), 0);
  EXPECT_EQ(only_b->WhyFloat("model.layers.0.mlp.gate_proj"),
            "no config group of config.json targets it");

  auto gptq = ParsePrequantizedFormat(
      {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128},
       {"dynamic", {{"+:.*down_proj$", {{"bits", 8}, {"group_size", -1}, {"damp_percent", 0.1}}},
                    {"-:model\\.layers\\.1\\.mlp\\.down_proj$", json::object()},
                    {".*v_proj$", {{"sym", false}}}}}},
      "config.json", "quantization_config");
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  ASSERT_EQ(gptq->groups.size(), 3u);  // the base, then each key with overrides
  EXPECT_EQ(bits_of(*gptq, "model.layers.0.mlp.down_proj"), 8);
  EXPECT_EQ((*gptq->ForModule("model.layers.0.mlp.down_proj"))->group_size, 0);
  EXPECT_EQ(bits_of(*gptq, "model.layers.1.mlp.down_proj"), 0);  // "-:" wins
  EXPECT_EQ(bits_of(*gptq, "model.layers.0.mlp.up_proj"), 4);
  EXPECT_EQ((*gptq->ForModule("model.layers.0.mlp.up_proj"))->group_size, 128);
  EXPECT_FALSE((*gptq->ForModule("model.layers.0.self_attn.v_proj"))->symmetric);
  EXPECT_TRUE((*gptq->ForModule("model.layers.0.self_attn.q_proj"))->symmetric);
  EXPECT_EQ(gptq->Describe(),
            "GPTQ 4-bit (groups of 128, sym, v1); dynamic +:.*down_proj$ 8-bit (one scale per "
            "output channel, sym, v1); dynamic .*v_proj$ 4-bit (groups of 128, asym, v1)");
}

}  // namespace
}  // namespace placer::loader
