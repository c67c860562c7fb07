#include "tests/fuzz/seed_corpus.h"

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint_writer.h"
#include "loader/file_util.h"

namespace placer::fuzz {
namespace {

namespace fs = std::filesystem;

// Hand-written configs covering fields the writer never emits.
constexpr const char* kConfigs[] = {
    R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 100, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
        "rope_type": "llama3"}, "eos_token_id": [1, 2], "torch_dtype": "bfloat16"})",
    R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
        "vocab_size": 100, "sliding_window": 4096, "head_dim": 32})",
    R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "tie_word_embeddings": true, "rope_scaling": {"type": "linear", "factor": 2}})",
    R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100,
        "n_inner": 100, "layer_norm_epsilon": 1e-5})",
    // Pre-quantized checkpoints' quantization_config (loader/prequantized_config.h).
    R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32,
        "sym": false, "desc_act": false, "checkpoint_format": "gptq", "damp_percent": 0.01}})",
    // GPTQModel's quantized lm_head (untied).
    R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 128,
        "tie_word_embeddings": false, "quantization_config": {"quant_method": "gptq", "bits": 4,
        "group_size": 32, "desc_act": true, "checkpoint_format": "gptq_v2", "lm_head": true}})",
    R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 64,
        "zero_point": true, "version": "gemm", "modules_to_not_convert": null}})",
    R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
        "quantization_status": "compressed", "ignore": ["lm_head"], "config_groups":
        {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int",
        "symmetric": false, "strategy": "group", "group_size": 32, "dynamic": false},
        "input_activations": null}}}})",
    // Partly quantized: each tool's way of naming the linears it left unquantized.
    R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 32,
        "modules_in_block_to_quantize": [["self_attn.q_proj", "self_attn.k_proj"], ["mlp.up_proj"]],
        "dynamic": {"-:.*\\.mlp\\.down_proj$": {}, "+:model\\.layers\\.1\\..*": {}}}})",
    R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 64,
        "zero_point": true, "version": "gemm", "modules_to_not_convert": ["o_proj", "layers.1."]}})",
    R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
        "ignore": ["lm_head", "model.layers.0.mlp.gate_proj", "re:.*self_attn\\.(q|k)_proj$"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4,
        "type": "int", "symmetric": true, "strategy": "group", "group_size": 32}}}}})",
    R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": 1, "n_head": 4,
        "vocab_size": 100, "quantization_config": {"quant_method": "compressed-tensors",
        "format": "int-quantized", "config_groups": {"g": {"targets": ["Linear"], "weights":
        {"num_bits": 8, "strategy": "channel", "symmetric": true}, "input_activations":
        {"num_bits": 8, "dynamic": true}}}}})",
    // Several config groups, each its own format: a pattern, full names, the "Linear" class.
    R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
        "quantization_config": {"quant_method": "compressed-tensors", "format": "mixed-precision",
        "ignore": ["lm_head"], "config_groups": {
        "attention": {"format": "int-quantized", "targets": ["re:.*self_attn\\.(q|k|v)_proj$"],
        "weights": {"num_bits": 8, "strategy": "channel", "symmetric": true},
        "input_activations": {"num_bits": 8, "dynamic": true}},
        "named": {"format": "pack-quantized", "targets": ["model.layers.1.mlp.down_proj"],
        "weights": {"num_bits": 8, "strategy": "channel", "symmetric": true}},
        "rest": {"format": "pack-quantized", "targets": ["Linear"], "weights": {"num_bits": 4,
        "strategy": "group", "group_size": 32, "symmetric": false}}}}})",
};

// AutoGPTQ's and AutoAWQ's own quantize_config.json (no quant_method: GPTQ).
constexpr const char* kQuantizeConfigs[] = {
    R"({"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": false,
        "static_groups": false, "sym": true, "true_sequential": true,
        "model_name_or_path": null, "model_file_base_name": null})",
    R"({"bits": 8, "group_size": -1, "desc_act": true, "sym": false,
        "checkpoint_format": "gptq_v2"})",
    R"({"quant_method": "awq", "w_bit": 4, "q_group_size": 128, "zero_point": true,
        "version": "GEMM"})",
};

void FillPattern(std::uint8_t* destination, std::size_t nbytes) {
  for (std::size_t i = 0; i < nbytes; ++i) destination[i] = static_cast<std::uint8_t>(i * 31 + 7);
}

}  // namespace

absl::StatusOr<SeedCorpus> WriteSeedCorpus(const std::string& root) {
  SeedCorpus corpus;
  std::error_code error;
  for (const char* target : {"safetensors_header", "shard_index", "model_config", "quantize_config"}) {
    fs::create_directories(fs::path(root) / target, error);
    if (error) return absl::UnavailableError(absl::StrCat(root, ": ", error.message()));
  }
  const fs::path work = fs::path(root) / "checkpoints";
  int case_number = 0;
  for (const char* arch : {"llama", "gpt2"}) {
    for (const bool sharded : {false, true}) {
      absl::StatusOr<loader::CheckpointSpec> spec = loader::PresetSpec(arch, "tiny");
      if (!spec.ok()) return spec.status();
      spec->layers = 2, spec->hidden = 16, spec->heads = 2;
      spec->kv_heads = std::string(arch) == "llama" ? 1 : 2;
      spec->intermediate = 32, spec->vocab = 40, spec->max_positions = 16;
      spec->dtype = sharded ? loader::DType::kBF16 : loader::DType::kF32;
      const std::string dir = (work / absl::StrCat(arch, case_number)).string();
      absl::StatusOr<loader::WrittenCheckpoint> written = loader::WriteCheckpoint(
          dir, *spec, sharded ? 3000 : 1ull << 40,
          [](const loader::ExpectedTensor&, loader::DType) {
            return [](std::uint8_t* destination, std::size_t nbytes) {
              FillPattern(destination, nbytes);
              return absl::OkStatus();
            };
          });
      if (!written.ok()) return written.status();
      for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        std::string target;
        if (entry.path().extension() == ".safetensors") target = "safetensors_header";
        if (name == "model.safetensors.index.json") target = "shard_index";
        if (name == "config.json") target = "model_config";
        if (target.empty()) continue;
        const fs::path destination =
            fs::path(root) / target / absl::StrCat(arch, case_number, "-", name);
        fs::copy_file(entry.path(), destination, fs::copy_options::overwrite_existing, error);
        if (error) return absl::UnavailableError(absl::StrCat(destination.string(), ": ", error.message()));
        (target == "safetensors_header" ? corpus.safetensors_header
         : target == "shard_index"      ? corpus.shard_index
                                        : corpus.model_config)
            .push_back(destination.string());
      }
      ++case_number;
    }
  }
  fs::remove_all(work, error);
  int config_number = 0;
  for (const char* config : kConfigs) {
    const std::string path =
        (fs::path(root) / "model_config" / absl::StrCat("handwritten", config_number++, ".json"))
            .string();
    if (absl::Status status = loader::WriteFileAtomically(path, config); !status.ok()) {
      return status;
    }
    corpus.model_config.push_back(path);
  }
  int quantize_number = 0;
  for (const char* config : kQuantizeConfigs) {
    const std::string path = (fs::path(root) / "quantize_config" /
                              absl::StrCat("quantize_config", quantize_number++, ".json"))
                                 .string();
    if (absl::Status status = loader::WriteFileAtomically(path, config); !status.ok()) {
      return status;
    }
    corpus.quantize_config.push_back(path);
  }
  return corpus;
}

}  // namespace placer::fuzz
