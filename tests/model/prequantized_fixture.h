// The fixture of the pre-quantized checkpoint tests (prequantized_checkpoint_test.cc,
// prequantized_offload_test.cc): each case's checkpoint written by the independent Python
// packer (prequantized_writer.py) from a random Llama with every bias, beside its reference
// (each linear weight replaced by its float dequantization, served unquantized).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loader/architectures/architecture.h"
#include "loader/checkpoint.h"
#include "loader/prequantized_tensors.h"
#include "model/causal_lm.h"

namespace placer::model::prequantized_test {

namespace fs = std::filesystem;
using runtime::RuntimePlan;

struct PrequantizedCase {
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
inline void PrintTo(const PrequantizedCase& c, std::ostream* os) { *os << c.name; }

class PrequantizedFixture : public ::testing::TestWithParam<PrequantizedCase> {
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
    const PrequantizedCase& c = GetParam();
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

  // A prompt chunk beyond the kernels' rows (dequantize + GEMM), one within them, one row.
  static std::vector<std::vector<int32_t>> ChunkPrompts() {
    std::vector<int32_t> long_prompt;
    for (int i = 0; i < 150; ++i) long_prompt.push_back((i * 37 + 5) % 300);
    return {long_prompt, {long_prompt.begin(), long_prompt.begin() + 12}, {long_prompt.front()}};
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

// Every format, bit width, group size and option the packer writes.
inline std::vector<PrequantizedCase> PrequantizedCases() {
  return {
      PrequantizedCase{"gptq_v1_int4_g32_asym", "gptq", 4, 32, ""},
      PrequantizedCase{"gptq_v1_int4_g64_sym_quantize_config", "gptq", 4, 64,
           "--sym --quantize-config-file"},
      PrequantizedCase{"gptq_v2_int8_per_column", "gptq_v2", 8, -1, ""},
      PrequantizedCase{"gptq_v1_int8_g32_sym", "gptq", 8, 32, "--sym"},
      PrequantizedCase{"gptq_v1_int4_g32_act_order", "gptq", 4, 32, "--act-order"},
      PrequantizedCase{"gptq_v2_int8_g64_sym_act_order", "gptq_v2", 8, 64, "--sym --act-order"},
      PrequantizedCase{"awq_gemm_int4_g64", "awq", 4, 64, ""},
      PrequantizedCase{"ct_pack_int4_g32_asym", "ct-pack", 4, 32, ""},
      PrequantizedCase{"ct_pack_int4_g64_sym_actorder_group", "ct-pack", 4, 64, "--sym --act-order"},
      PrequantizedCase{"ct_pack_int4_channel_sym", "ct-pack", 4, -1, "--sym"},
      PrequantizedCase{"ct_pack_int8_g64_sym", "ct-pack", 8, 64, "--sym"},
      PrequantizedCase{"ct_int8_channel", "ct-int", 8, -1, "--sym"},
      // Partly quantized: each format's own way of naming the float linears.
      PrequantizedCase{"gptq_v1_int4_g32_float_o_proj", "gptq", 4, 32,
           "--float-modules=self_attn.o_proj",
           {"model.layers.0.self_attn.o_proj", "model.layers.1.self_attn.o_proj"}},
      PrequantizedCase{"gptq_v1_int4_g32_lm_head", "gptq", 4, 32, "--lm-head", {}, true},
      PrequantizedCase{"gptq_v2_int8_g64_act_order_lm_head", "gptq_v2", 8, 64,
           "--sym --act-order --lm-head", {}, true},
      PrequantizedCase{"gptq_v2_int4_g64_dynamic_float", "gptq_v2", 4, 64,
           "--sym --act-order --float-modules=self_attn.v_proj,model.layers.1.mlp.down_proj",
           {"model.layers.0.self_attn.v_proj", "model.layers.1.self_attn.v_proj",
            "model.layers.1.mlp.down_proj"}},
      PrequantizedCase{"awq_gemm_int4_g32_float_down", "awq", 4, 32,
           "--float-modules=mlp.down_proj",
           {"model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"}},
      PrequantizedCase{"ct_pack_int4_g32_ignore", "ct-pack", 4, 32,
           "--float-modules=self_attn.q_proj,model.layers.0.mlp.gate_proj",
           {"model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.q_proj",
            "model.layers.0.mlp.gate_proj"}},
      PrequantizedCase{"ct_int8_channel_ignore_up", "ct-int", 8, -1,
           "--sym --float-modules=mlp.up_proj",
           {"model.layers.0.mlp.up_proj", "model.layers.1.mlp.up_proj"}},
      // Several config groups: int8 W8A8 attention by a pattern, int4 groups
      // of 32 for every other linear, 8-bit per channel for two linears named
      // in full (a name before the "Linear" class), one linear ignored.
      PrequantizedCase{"ct_mixed_groups", "ct-mixed", 4, 32,
           "--ct-named=model.layers.1.mlp.down_proj,model.layers.0.self_attn.o_proj"
           " --float-modules=model.layers.0.mlp.up_proj",
           {"model.layers.0.mlp.up_proj"}, false,
           {{"self_attn.q_proj", {8, -1}}, {"self_attn.k_proj", {8, -1}},
            {"self_attn.v_proj", {8, -1}}, {"model.layers.1.mlp.down_proj", {8, -1}},
            {"model.layers.0.self_attn.o_proj", {8, -1}}}},
      // GPTQModel's dynamic: 8-bit groups of 64 for down_proj by a "+:" key,
      // v_proj skipped by a "-:" key, 4-bit groups of 32 for the rest.
      PrequantizedCase{"gptq_v2_dynamic_override", "gptq_v2", 4, 32,
           "--act-order '--gptq-override=.*down_proj:8:64' --gptq-dynamic"
           " --float-modules=self_attn.v_proj",
           {"model.layers.0.self_attn.v_proj", "model.layers.1.self_attn.v_proj"},
           false, {{"mlp.down_proj", {8, 64}}}},
      PrequantizedCase{"ct_mixed_groups_sym_actorder", "ct-mixed", 4, 64, "--sym --act-order",
           {}, false,
           {{"self_attn.q_proj", {8, -1}}, {"self_attn.k_proj", {8, -1}},
            {"self_attn.v_proj", {8, -1}}}}};
}

inline std::string CaseName(const ::testing::TestParamInfo<PrequantizedCase>& info) {
  return info.param.name;
}

}  // namespace placer::model::prequantized_test
