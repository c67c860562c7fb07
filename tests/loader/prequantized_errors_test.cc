// Every malformed field of a pre-quantized checkpoint is refused with a message naming the
// file, the field or tensor and why. Each case starts from a good checkpoint written by the
// independent Python packer (tests/model/prequantized_writer.py) and breaks one thing.
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <random>
#include <algorithm>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "loader/dtype_torch.h"
#include "loader/prequantized_repack.h"
#include "loader/safetensors_writer.h"
#include "tests/loader/test_files.h"

namespace placer::loader {
namespace {

namespace fs = std::filesystem;
using testing::ReadFileBytes;
using testing::TempDir;
using testing::WriteFileBytes;

const char kQProj[] = "model.layers.0.self_attn.q_proj";

// One good checkpoint per format, written once for the whole suite.
class PrequantizedErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sources_ = new TempDir();
    const std::string base = (*sources_) / "base";
    ASSERT_EQ(std::system(absl::StrCat(PLACER_MAKE_CHECKPOINT_PATH, " --out ", base,
                                       " --arch llama --layers 1 --hidden 128 --heads 4 --kv-heads 2"
                                       " --intermediate 256 --vocab 300 --attention-bias --seed 5"
                                       " > /dev/null").c_str()),
              0);
    for (const auto& [name, args] : std::map<std::string, std::string>{
             {"gptq", "gptq 4 32"}, {"awq", "awq 4 32"}, {"ct-pack", "ct-pack 4 32"},
             {"ct-int", "ct-int 8 -1 --sym"}, {"gptq-file", "gptq 4 32 --quantize-config-file"}}) {
      ASSERT_EQ(std::system(absl::StrCat("/usr/bin/python3 ", PLACER_SOURCE_DIR,
                                         "/tests/model/prequantized_writer.py ", base, " ",
                                         (*sources_) / name, " ", (*sources_) / (name + "-ref"), " ",
                                         args).c_str()),
                0);
    }
  }
  static void TearDownTestSuite() { delete sources_; }

  // A copy of `format`'s good checkpoint to break.
  std::string Copy(const std::string& format) {
    const std::string dir = dir_ / format;
    fs::remove_all(dir);
    fs::copy((*sources_) / format, dir);
    return dir;
  }
  static void EditJson(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json json = nlohmann::json::parse(ReadFileBytes(path));
    edit(json);
    WriteFileBytes(path, json.dump());
  }
  static void EditQuantization(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
    EditJson(dir + "/config.json", [&](nlohmann::json& config) { edit(config["quantization_config"]); });
  }
  // Rewrites model.safetensors; `edit` may replace tensors (by stored name) or erase them.
  static void EditTensors(const std::string& dir,
                          const std::function<void(std::map<std::string, at::Tensor>&)>& edit) {
    std::map<std::string, at::Tensor> tensors;
    {
      auto checkpoint = Checkpoint::Open(dir);
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      for (const auto& [name, info] : (*checkpoint)->tensors()) {
        tensors[info.stored_name] = (*checkpoint)->ReadTensor(name)->clone();
      }
    }
    edit(tensors);
    SafetensorsWriter writer(std::map<std::string, std::string>{{"format", "pt"}});
    for (auto& [name, tensor] : tensors) {
      tensor = tensor.contiguous();
      ASSERT_TRUE(writer.AddBytes(name, *FromScalarType(tensor.scalar_type()), tensor.sizes().vec(),
                                  absl::string_view(static_cast<const char*>(tensor.data_ptr()),
                                                    tensor.nbytes())).ok());
    }
    ASSERT_TRUE(writer.Write(dir + "/model.safetensors").ok());
  }
  static void ExpectOpenFails(const std::string& dir, std::initializer_list<std::string> needles) {
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_FALSE(checkpoint.ok()) << "opened a bad checkpoint in " << dir;
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(checkpoint.status().message()).find(needle), std::string::npos)
          << "missing \"" << needle << "\" in: " << checkpoint.status().message();
    }
  }
  // Opens, then repacks q_proj, which must fail naming every needle.
  static void ExpectRepackFails(const std::string& dir, std::initializer_list<std::string> needles) {
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(absl::StrCat(kQProj, ".weight"));
    ASSERT_NE(source, nullptr);
    auto packed = RepackQuantizedLinear(**checkpoint, *source);
    ASSERT_FALSE(packed.ok()) << "repacked a bad weight in " << dir;
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(packed.status().message()).find(needle), std::string::npos)
          << "missing \"" << needle << "\" in: " << packed.status().message();
    }
  }

  static TempDir* sources_;
  TempDir dir_;
};
TempDir* PrequantizedErrorsTest::sources_ = nullptr;

TEST_F(PrequantizedErrorsTest, TheGoodCheckpointsOpenAndRepack) {
  for (const std::string format : {"gptq", "awq", "ct-pack", "ct-int", "gptq-file"}) {
    auto checkpoint = Checkpoint::Open((*sources_) / format);
    ASSERT_TRUE(checkpoint.ok()) << format << ": " << checkpoint.status();
    ASSERT_TRUE((*checkpoint)->config().quantization.has_value()) << format;
    const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(absl::StrCat(kQProj, ".weight"));
    ASSERT_NE(source, nullptr) << format;
    EXPECT_TRUE(RepackQuantizedLinear(**checkpoint, *source).ok()) << format;
  }
}

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
      {"lm_head", {[](nlohmann::json& q) { q["lm_head"] = true; }, {"quantization_config.lm_head", "lm_head"}}},
      // The config leaves k_proj.. unquantized, the tensors have them quantized.
      {"subset", {[](nlohmann::json& q) { q["modules_in_block_to_quantize"] = nlohmann::json::array({nlohmann::json::array({"self_attn.q_proj"})}); }, {"self_attn.k_proj.weight\" is missing", "unquantized", "quantization_config.modules_in_block_to_quantize [[\"self_attn.q_proj\"]]"}}},
      {"subset type", {[](nlohmann::json& q) { q["modules_in_block_to_quantize"] = nlohmann::json::array({nlohmann::json::array({7})}); }, {"quantization_config.modules_in_block_to_quantize[0][0]"}}},
      {"dynamic skip", {[](nlohmann::json& q) { q["dynamic"] = {{"-:.*\\.mlp\\.down_proj$", nlohmann::json::object()}}; }, {"mlp.down_proj.weight\" is missing", "quantization_config.dynamic"}}},
      {"dynamic override", {[](nlohmann::json& q) { q["dynamic"] = {{"+:.*q_proj", {{"bits", 8}}}}; }, {"quantization_config.dynamic.+:.*q_proj", "per-module overrides"}}},
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
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_1"] = q["config_groups"]["group_0"]; }, {"quantization_config.config_groups", "exactly one group"}},
      {"ct-pack", [](nlohmann::json& q) { q["config_groups"]["group_0"]["targets"] = {"Embedding"}; }, {"config_groups.group_0.targets"}},
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

TEST_F(PrequantizedErrorsTest, TensorsAreCheckedByNameDtypeAndShape) {
  const std::string q = kQProj;
  {
    const std::string dir = Copy("gptq");
    EditTensors(dir, [&](auto& t) { t.erase(q + ".qzeros"); });
    ExpectOpenFails(dir, {q + ".qzeros", "is missing", "GPTQ 4-bit"});
  }
  {
    const std::string dir = Copy("awq");
    EditTensors(dir, [&](auto& t) { t[q + ".qweight"] = t[q + ".qweight"].repeat({1, 2}); });
    ExpectOpenFails(dir, {q + ".qweight", "has shape [128, 32]", "implies [128, 16]"});
  }
  {
    const std::string dir = Copy("gptq");
    EditTensors(dir, [&](auto& t) { t[q + ".scales"] = t[q + ".scales"].to(at::kInt); });
    ExpectOpenFails(dir, {q + ".scales", "is I32", "F16 or BF16 or F32"});
  }
  {
    const std::string dir = Copy("gptq");
    EditTensors(dir, [&](auto& t) { t[q + ".weight"] = at::ones({128, 128}); });
    ExpectOpenFails(dir, {q + ".weight", "says it is stored quantized"});
  }
  {
    const std::string dir = Copy("ct-pack");
    EditTensors(dir, [&](auto& t) { t.erase(q + ".weight_zero_point"); });
    ExpectOpenFails(dir, {q + ".weight_zero_point", "is missing"});
  }
  {
    const std::string dir = Copy("ct-int");
    EditTensors(dir, [&](auto& t) { t[q + ".weight"] = t[q + ".weight"].to(at::kFloat); });
    ExpectOpenFails(dir, {q + ".weight", "is F32", "I8"});
  }
  {
    const std::string dir = Copy("gptq");
    EditTensors(dir, [&](auto& t) { t["model.layers.0.self_attn.q_proj.qstray"] = at::ones({2}); });
    ExpectOpenFails(dir, {"q_proj.qstray", "is not part of"});
  }
}

TEST_F(PrequantizedErrorsTest, ValuesThatShapesCannotRejectAreCheckedAtRepack) {
  const std::string q = kQProj;
  {
    const std::string dir = Copy("ct-pack");
    EditTensors(dir, [&](auto& t) { t[q + ".weight_shape"] = at::tensor(std::vector<int64_t>{128, 64}); });
    ExpectRepackFails(dir, {q + ".weight_shape", "says [128, 64]", "implies [128, 128]"});
  }
  {
    // Inputs 0 and 32 swap groups without desc_act: refused (not silently served wrong).
    const std::string dir = Copy("gptq");
    EditTensors(dir, [&](auto& t) {
      at::Tensor g = t[q + ".g_idx"].clone();
      g[0] = 1;
      g[32] = 0;
      t[q + ".g_idx"] = g;
    });
    ExpectRepackFails(dir, {q + ".g_idx", "input 0 is in group 1", "does not match", "desc_act is false"});
    fs::remove_all(dir);
  }
  {
    // The same swap with desc_act: activation order, served with the inputs regrouped (the
    // stable sort of g_idx: group 0 is inputs 1..32, group 1 is input 0 then 33..63).
    const std::string dir = Copy("gptq");
    EditQuantization(dir, [&](nlohmann::json& c) { c["desc_act"] = true; });
    EditTensors(dir, [&](auto& t) {
      at::Tensor g = t[q + ".g_idx"].clone();
      g[0] = 1;
      g[32] = 0;
      t[q + ".g_idx"] = g;
    });
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(q + ".weight");
    ASSERT_NE(source, nullptr);
    auto order = QuantizedInputOrder(**checkpoint, *source);
    ASSERT_TRUE(order.ok()) << order.status();
    ASSERT_TRUE(order->defined());
    std::vector<int64_t> expected;
    for (int64_t i = 1; i <= 32; ++i) expected.push_back(i);
    expected.push_back(0);
    for (int64_t i = 33; i < 128; ++i) expected.push_back(i);
    EXPECT_TRUE(order->to(at::kLong).equal(at::tensor(expected, at::kLong))) << *order;
    EXPECT_TRUE(RepackQuantizedLinear(**checkpoint, *source).ok());
    // k_proj keeps its inputs in group order: no order.
    auto k_order = QuantizedInputOrder(**checkpoint,
                                       *(*checkpoint)->QuantizedLinear(
                                           "model.layers.0.self_attn.k_proj.weight"));
    ASSERT_TRUE(k_order.ok()) << k_order.status();
    EXPECT_FALSE(k_order->defined());
    fs::remove_all(dir);
  }
  {
    // desc_act, but a group index that cannot be: groups must each hold group_size inputs,
    // and be among the weight's groups.
    struct Bad {
      int64_t input, group;
      std::vector<std::string> needles;
    };
    for (const Bad& bad : {Bad{0, 1, {"group 0 holds 31 inputs, not group_size 32"}},
                           Bad{5, 4, {"input 5 is in group 4, outside 0..3"}},
                           Bad{7, -1, {"input 7 is in group -1, outside 0..3"}}}) {
      const std::string dir = Copy("gptq");
      EditQuantization(dir, [&](nlohmann::json& c) { c["desc_act"] = true; });
      EditTensors(dir, [&](auto& t) {
        at::Tensor g = t[q + ".g_idx"].clone();
        g[bad.input] = static_cast<int32_t>(bad.group);
        t[q + ".g_idx"] = g;
      });
      auto checkpoint = Checkpoint::Open(dir);
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(q + ".weight");
      for (const auto& result : {QuantizedInputOrder(**checkpoint, *source),
                                 RepackQuantizedLinear(**checkpoint, *source)}) {
        ASSERT_FALSE(result.ok()) << "served g_idx with input " << bad.input << " in group " << bad.group;
        EXPECT_NE(std::string(result.status().message()).find(q + ".g_idx"), std::string::npos)
            << result.status();
        for (const std::string& needle : bad.needles) {
          EXPECT_NE(std::string(result.status().message()).find(needle), std::string::npos)
              << "missing \"" << needle << "\" in: " << result.status();
        }
      }
      fs::remove_all(dir);
    }
  }
  {
    // compressed-tensors actorder "weight" and "static" keep the groups in input order: served
    // as they are, with no weight_g_idx.
    for (const char* actorder : {"weight", "static"}) {
      const std::string dir = Copy("ct-pack");
      EditQuantization(dir, [&](nlohmann::json& c) {
        c["config_groups"]["group_0"]["weights"]["actorder"] = actorder;
      });
      auto checkpoint = Checkpoint::Open(dir);
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(q + ".weight");
      ASSERT_NE(source, nullptr);
      EXPECT_TRUE(RepackQuantizedLinear(**checkpoint, *source).ok());
      fs::remove_all(dir);
    }
  }
  {
    // desc_act with g_idx in group order (static groups) is served.
    const std::string dir = Copy("gptq");
    EditQuantization(dir, [&](nlohmann::json& c) { c["desc_act"] = true; });
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    EXPECT_TRUE(RepackQuantizedLinear(**checkpoint, *(*checkpoint)->QuantizedLinear(q + ".weight")).ok());
  }
}

// g_idx is outside bytes: random ones (permutations of valid group orders, with some entries
// moved or out of range) either give an order that regroups the inputs exactly as g_idx says,
// or an error naming g_idx; which one is decided here independently, from the counts.
TEST_F(PrequantizedErrorsTest, RandomGroupIndicesAreServedExactlyOrRefused) {
  const std::string q = kQProj;
  const std::string dir = Copy("gptq");
  EditQuantization(dir, [&](nlohmann::json& c) { c["desc_act"] = true; });
  constexpr int64_t kIn = 128, kGroupSize = 32, kGroups = 4;
  std::mt19937 random(7);
  int served = 0, refused = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<int32_t> g(kIn);
    for (int64_t i = 0; i < kIn; ++i) g[static_cast<size_t>(i)] = static_cast<int32_t>(i / kGroupSize);
    std::shuffle(g.begin(), g.end(), random);
    const int changes = trial % 3;  // 0: a valid activation order
    for (int c = 0; c < changes; ++c) {
      g[random() % kIn] = static_cast<int32_t>(static_cast<int64_t>(random() % (kGroups + 3)) - 1);
    }
    bool valid = true;
    std::vector<int64_t> counts(kGroups, 0);
    for (int32_t v : g) {
      if (v < 0 || v >= kGroups) {
        valid = false;
      } else {
        ++counts[static_cast<size_t>(v)];
      }
    }
    for (int64_t n : counts) valid = valid && n == kGroupSize;
    EditTensors(dir, [&](auto& t) { t[q + ".g_idx"] = at::tensor(g, at::kInt); });
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    const QuantizedLinearSource* source = (*checkpoint)->QuantizedLinear(q + ".weight");
    ASSERT_NE(source, nullptr);
    auto order = QuantizedInputOrder(**checkpoint, *source);
    ASSERT_EQ(order.ok(), valid) << "trial " << trial << ": " << order.status();
    if (!order.ok()) {
      ++refused;
      EXPECT_NE(std::string(order.status().message()).find(q + ".g_idx"), std::string::npos)
          << order.status();
      EXPECT_FALSE(RepackQuantizedLinear(**checkpoint, *source).ok());
      continue;
    }
    ++served;
    ASSERT_TRUE(order->defined());  // a shuffle of 128 inputs is never the identity here
    const at::Tensor o = order->to(at::kLong);
    ASSERT_EQ(o.numel(), kIn);
    EXPECT_TRUE(std::get<0>(at::sort(o)).equal(at::arange(kIn, at::kLong))) << "not a permutation";
    for (int64_t j = 0; j < kIn; ++j) {
      const int64_t input = o[j].item<int64_t>();
      ASSERT_EQ(g[static_cast<size_t>(input)], j / kGroupSize) << "position " << j;
      if (j % kGroupSize != 0) {
        EXPECT_LT(o[j - 1].item<int64_t>(), input) << "a group keeps its inputs in stored order";
      }
    }
    EXPECT_TRUE(RepackQuantizedLinear(**checkpoint, *source).ok());
  }
  EXPECT_GT(served, 10);
  EXPECT_GT(refused, 10);
}

}  // namespace
}  // namespace placer::loader
