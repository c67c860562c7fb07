// Every malformed quantization_config field of a pre-quantized checkpoint (GPTQ, AWQ,
// compressed-tensors; config.json or quantize_config.json) is refused naming the file, the
// field and why; a config that leaves linears unquantized which the tensors hold quantized
// names the field that said so.
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/loader/prequantized_checkpoints.h"

namespace placer::loader {
namespace {

namespace fs = std::filesystem;
using testing::WriteFileBytes;

TEST_F(PrequantizedErrorsTest, GptqConfigFieldsAreValidated) {
  const std::map<std::string, std::pair<std::function<void(nlohmann::json&)>, std::vector<std::string>>> cases = {
      {"method", {[](nlohmann::json& q) { q["quant_method"] = "bitsandbytes"; }, {"quantization_config.quant_method", "bitsandbytes", "not supported"}}},
      {"bits", {[](nlohmann::json& q) { q["bits"] = 3; }, {"quantization_config.bits", "3-bit GPTQ"}}},
      {"bits type", {[](nlohmann::json& q) { q["bits"] = "4"; }, {"quantization_config.bits"}}},
      {"group 48", {[](nlohmann::json& q) { q["group_size"] = 48; }, {"quantization_config.group_size", "multiple of 32"}}},
      {"group 0", {[](nlohmann::json& q) { q["group_size"] = 0; }, {"quantization_config.group_size", "positive or -1"}}},
      {"group 96", {[](nlohmann::json& q) { q["group_size"] = 96; }, {"group size 96 does not divide the 128 inputs"}}},
      {"sym type", {[](nlohmann::json& q) { q["sym"] = "yes"; }, {"quantization_config.sym"}}},
      {"format", {[](nlohmann::json& q) { q["checkpoint_format"] = "marlin"; }, {"quantization_config.checkpoint_format", "marlin"}}},
      // GPTQModel's quantized lm_head: this one stores a float lm_head over 300 outputs, which
      // 4-bit words cannot pack.
      {"lm_head", {[](nlohmann::json& q) { q["lm_head"] = true; }, {"lm_head: 300 outputs do not pack", "lm_head: true"}}},
      // The config leaves k_proj.. unquantized, the tensors have them quantized.
      {"subset", {[](nlohmann::json& q) { q["modules_in_block_to_quantize"] = nlohmann::json::array({nlohmann::json::array({"self_attn.q_proj"})}); }, {"self_attn.k_proj.weight\" is missing", "unquantized", "quantization_config.modules_in_block_to_quantize [[\"self_attn.q_proj\"]]"}}},
      {"subset type", {[](nlohmann::json& q) { q["modules_in_block_to_quantize"] = nlohmann::json::array({nlohmann::json::array({7})}); }, {"quantization_config.modules_in_block_to_quantize[0][0]"}}},
      {"dynamic skip", {[](nlohmann::json& q) { q["dynamic"] = {{"-:.*\\.mlp\\.down_proj$", nlohmann::json::object()}}; }, {"mlp.down_proj.weight\" is missing", "quantization_config.dynamic"}}},
      // An override the tensors do not follow: q_proj's 4-bit words read as 8-bit ones.
      {"dynamic override", {[](nlohmann::json& q) { q["dynamic"] = {{"+:.*q_proj", {{"bits", 8}}}}; }, {"q_proj.qweight\" has shape [16, 128]", "GPTQ 8-bit", "implies [32, 128]"}}},
      {"dynamic override bits", {[](nlohmann::json& q) { q["dynamic"] = {{"+:.*q_proj", {{"bits", 3}}}}; }, {"quantization_config.dynamic.+:.*q_proj.bits", "3-bit GPTQ"}}},
      {"dynamic override group", {[](nlohmann::json& q) { q["dynamic"] = {{".*q_proj", {{"group_size", 48}}}}; }, {"quantization_config.dynamic..*q_proj.group_size", "multiple of 32"}}},
      {"dynamic override field", {[](nlohmann::json& q) { q["dynamic"] = {{"+:.*q_proj", {{"quant_method", "awq"}}}}; }, {"quantization_config.dynamic.+:.*q_proj.quant_method", "not an override"}}},
      {"dynamic override type", {[](nlohmann::json& q) { q["dynamic"] = {{"+:.*q_proj", 8}}; }, {"quantization_config.dynamic.+:.*q_proj", "object of overrides"}}},
      {"dynamic overlap", {[](nlohmann::json& q) { q["dynamic"] = {{"+:.*q_proj", {{"bits", 8}}}, {"+:model\\.layers\\.0\\.", {{"bits", 8}}}}; }, {"quantization_config.dynamic.+:.*q_proj and quantization_config.dynamic.+:model\\.layers\\.0\\. both name model.layers.0.self_attn.q_proj", "ambiguous"}}},
      {"dynamic regex", {[](nlohmann::json& q) { q["dynamic"] = {{"-:(?=lookahead)", nlohmann::json::object()}}; }, {"quantization_config.dynamic.-:(?=lookahead)", "(?=lookahead)", "RE2"}}},
      {"not object", {[](nlohmann::json& q) { q = 4; }, {"quantization_config", "must be an object"}}},
  };
  for (const auto& [name, c] : cases) {
    SCOPED_TRACE(name);
    const std::string dir = Copy("gptq");
    EditQuantization(dir, c.first);
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_FALSE(checkpoint.ok());
    EXPECT_NE(std::string(checkpoint.status().message()).find("config.json"), std::string::npos)
        << checkpoint.status();
    for (const std::string& needle : c.second) {
      EXPECT_NE(std::string(checkpoint.status().message()).find(needle), std::string::npos)
          << "missing \"" << needle << "\" in: " << checkpoint.status().message();
    }
    fs::remove_all(dir);
  }
}

TEST_F(PrequantizedErrorsTest, AQuantizedLmHeadMustBeUntied) {
  // lm_head: true over a model whose lm_head reads the token embedding: nothing to read the
  // quantized lm_head from, and no float table to quantize silently instead.
  const std::string dir = Copy("gptq");
  EditJson(dir + "/config.json", [](nlohmann::json& config) {
    config["tie_word_embeddings"] = true;
    config["quantization_config"]["lm_head"] = true;
  });
  auto checkpoint = Checkpoint::Open(dir);
  ASSERT_FALSE(checkpoint.ok());
  for (const char* needle : {"lm_head: true", "tie_word_embeddings", "config.json"}) {
    EXPECT_NE(std::string(checkpoint.status().message()).find(needle), std::string::npos)
        << "missing \"" << needle << "\" in: " << checkpoint.status().message();
  }
}

TEST_F(PrequantizedErrorsTest, QuantizeConfigFileIsValidatedNamingIt) {
  const std::string dir = Copy("gptq-file");
  EditJson(dir + "/quantize_config.json", [](nlohmann::json& q) { q["bits"] = 5; });
  ExpectOpenFails(dir, {"quantize_config.json", "bits", "5-bit GPTQ"});
  WriteFileBytes(dir + "/quantize_config.json", "{\"bits\": 4,");
  ExpectOpenFails(dir, {"quantize_config.json", "not valid JSON"});
}

TEST_F(PrequantizedErrorsTest, AwqAndCompressedTensorsConfigFieldsAreValidated) {
  struct Case {
    std::string format;
    std::function<void(nlohmann::json&)> edit;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"awq", [](nlohmann::json& q) { q["version"] = "gemv"; }, {"quantization_config.version", "gemv"}},
      {"awq", [](nlohmann::json& q) { q["zero_point"] = false; }, {"quantization_config.zero_point"}},
      {"awq", [](nlohmann::json& q) { q["bits"] = 8; }, {"quantization_config.bits", "8-bit AWQ"}},
      {"awq", [](nlohmann::json& q) { q["modules_to_not_convert"] = {"q_proj"}; }, {"self_attn.q_proj.weight\" is missing", "unquantized", "quantization_config.modules_to_not_convert [\"q_proj\"]"}},
      {"awq", [](nlohmann::json& q) { q["modules_to_not_convert"] = "q_proj"; }, {"quantization_config.modules_to_not_convert", "list of module names"}},
      {"awq", [](nlohmann::json& q) { q["modules_to_not_convert"] = {"q_proj", 3}; }, {"quantization_config.modules_to_not_convert[1]"}},
      {"ct-pack", [](nlohmann::json& q) { q["format"] = "float-quantized"; }, {"quantization_config.format", "float-quantized"}},
      {"ct-pack", [](nlohmann::json& q) { q["quantization_status"] = "frozen"; }, {"quantization_config.quantization_status"}},
      {"ct-pack", [](nlohmann::json& q) { q["ignore"] = {"lm_head", "model.layers.0.mlp.down_proj"}; }, {"model.layers.0.mlp.down_proj.weight\" is missing", "unquantized", "quantization_config.ignore"}},
      {"ct-pack", [](nlohmann::json& q) { q["ignore"] = {"lm_head", "re:.*layers\\.0\\..*_proj$"}; }, {"model.layers.0.self_attn.q_proj.weight\" is missing", "quantization_config.ignore"}},
      {"ct-pack", [](nlohmann::json& q) { q["ignore"] = {"lm_head", "re:(a)\\1"}; }, {"quantization_config.ignore[1]", "(a)\\1", "not supported"}},
      {"ct-pack", [](nlohmann::json& q) { q["kv_cache_scheme"] = {{"num_bits", 8}}; }, {"quantization_config.kv_cache_scheme"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_1"] = q["config_groups"]["group_0"]; }, {"quantization_config.config_groups.group_1.targets", "\"Linear\" as quantization_config.config_groups.group_0.targets does", "ambiguous"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["targets"] = {"Embedding"}; }, {"config_groups.group_0.targets[0]", "\"Embedding\" is not supported"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["targets"] = nlohmann::json::array(); }, {"config_groups.group_0.targets", "names no module"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"] = nlohmann::json::object(); }, {"quantization_config.config_groups", "no group"}},
      // Several groups: each may name its own format, must under "mixed-precision".
      {"ct-pack", [](nlohmann::json& q) { q["format"] = "mixed-precision"; }, {"config_groups.group_0.format", "required", "mixed-precision"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["format"] = "nvfp4-pack-quantized"; }, {"config_groups.group_0.format", "nvfp4-pack-quantized", "not supported"}},
      // Two groups naming one linear (a pattern and a full name) at the same precedence.
      {"ct-pack", [](nlohmann::json& q) {
         q["config_groups"]["group_1"] = q["config_groups"]["group_0"];
         q["config_groups"]["group_1"]["targets"] = {"re:.*q_proj$"};
         q["config_groups"]["group_2"] = q["config_groups"]["group_0"];
         q["config_groups"]["group_2"]["targets"] = {"model.layers.0.self_attn.q_proj"};
       }, {"config_groups.group_1.targets and quantization_config.config_groups.group_2.targets both name model.layers.0.self_attn.q_proj", "ambiguous"}},
      // A group for the MLPs alone: the attention linears are float, which the tensors are not.
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["targets"] = {"re:.*mlp\\..*"}; }, {"self_attn.q_proj.weight\" is missing", "unquantized (no config group of", "config.json targets it)"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["targets"] = {"re:(?<=x)"}; }, {"config_groups.group_0.targets", "(?<=x)", "RE2"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["weights"]["num_bits"] = 2; }, {"config_groups.group_0.weights.num_bits", "2-bit"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["weights"]["type"] = "float"; }, {"config_groups.group_0.weights.type"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["weights"]["strategy"] = "tensor"; }, {"config_groups.group_0.weights.strategy", "tensor"}},
      // actorder "group" needs each input's group: weight_g_idx, which this checkpoint lacks.
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["weights"]["actorder"] = "group"; }, {"q_proj.weight_g_idx", "missing"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["weights"]["actorder"] = "sideways"; }, {"config_groups.group_0.weights.actorder", "not an activation ordering"}},
      {"ct-int", [](nlohmann::json& q) { q["config_groups"]["group_0"]["weights"]["actorder"] = "group"; }, {"config_groups.group_0.weights.actorder", "pack-quantized"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["weights"]["group_size"] = 40; }, {"config_groups.group_0.weights.group_size", "multiple of 32"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["weights"]["dynamic"] = true; }, {"config_groups.group_0.weights.dynamic"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["output_activations"] = {{"num_bits", 8}}; }, {"config_groups.group_0.output_activations"}},
      {"ct-int", [](nlohmann::json& q) { q["config_groups"]["group_0"]["input_activations"]["dynamic"] = false; }, {"config_groups.group_0.input_activations.dynamic"}},
      {"ct-int", [](nlohmann::json& q) { q["config_groups"]["group_0"]["weights"]["num_bits"] = 4; }, {"config_groups.group_0.weights.num_bits", "4-bit int-quantized"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needles.front());
    const std::string dir = Copy(c.format);
    EditQuantization(dir, c.edit);
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_FALSE(checkpoint.ok());
    for (const std::string& needle : c.needles) {
      EXPECT_NE(std::string(checkpoint.status().message()).find(needle), std::string::npos)
          << "missing \"" << needle << "\" in: " << checkpoint.status().message();
    }
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace placer::loader
