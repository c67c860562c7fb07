// config.json normalized into one struct for every supported architecture,
// so model code reads `hidden_size` whether the file says hidden_size (Llama
// family) or n_embd (GPT-2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "loader/prequantized_config.h"

namespace placer::loader {

enum class Architecture { kLlama, kMistral, kQwen2, kGpt2 };

// "LlamaForCausalLM", ...: the names config.json "architectures" uses.
std::vector<std::string> SupportedArchitectures();
absl::string_view ArchitectureName(Architecture architecture);

struct RopeScaling {
  std::string rope_type;  // "linear", "dynamic", "llama3", "yarn", ...
  double factor = 1.0;
  // llama3 only.
  std::optional<double> low_freq_factor;
  std::optional<double> high_freq_factor;
  std::optional<std::int64_t> original_max_position_embeddings;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string model_type;  // "llama", "mistral", "qwen2", "gpt2"

  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  std::int64_t head_dim = 0;             // defaults to hidden / heads
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;

  // rms_norm_eps for the Llama family, layer_norm_epsilon for GPT-2.
  double norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  std::optional<std::int64_t> sliding_window;  // Mistral / Qwen2 when set
  // Qwen2 only: the window applies when use_sliding_window is true, and then only to the
  // layers from max_window_layers on (transformers' Qwen2Attention).
  bool use_sliding_window = false;
  std::int64_t max_window_layers = 0;

  // Which linear layers carry a bias. Llama's attention_bias covers q, k, v
  // and o; Qwen2 always has q/k/v bias and never o bias; GPT-2 has all.
  bool qkv_bias = false;
  bool o_proj_bias = false;
  bool mlp_bias = false;
  bool tie_word_embeddings = false;

  std::string torch_dtype;  // as written ("bfloat16"), empty when absent
  std::optional<std::int64_t> bos_token_id;
  std::vector<std::int64_t> eos_token_ids;  // eos_token_id may be int or list
  std::optional<std::int64_t> pad_token_id;

  // A pre-quantized checkpoint: config.json's quantization_config, or quantize_config.json
  // (loader/checkpoint_files.h reads that one).
  std::optional<PrequantizedFormat> quantization;

  nlohmann::json raw;  // the file as parsed, for fields not normalized here

  bool is_gpt2() const { return architecture == Architecture::kGpt2; }
  // Keys a query of `layer` sees (itself and the window - 1 before it); 0 for all before it.
  // Mistral applies sliding_window to every layer; Qwen2 as described above; Llama never.
  std::int64_t attention_window(std::int64_t layer) const {
    if (!sliding_window || *sliding_window <= 0) return 0;
    if (architecture == Architecture::kMistral) return *sliding_window;
    if (architecture == Architecture::kQwen2 && use_sliding_window && layer >= max_window_layers) {
      return *sliding_window;
    }
    return 0;
  }
  // The window every decoder layer has, or 0 when some layer sees all keys: a sequence's KV
  // cache then never needs more positions than this (model/kv_cache.h).
  std::int64_t shared_attention_window() const {
    const std::int64_t window = num_hidden_layers > 0 ? attention_window(0) : 0;
    for (std::int64_t layer = 1; layer < num_hidden_layers; ++layer) {
      if (attention_window(layer) != window) return 0;
    }
    return window;
  }
  // The longest sequence the model runs: max_position_embeddings, times the factor with
  // "dynamic" RoPE scaling, which rescales the rotary base beyond it (as transformers does).
  std::int64_t context_length() const {
    if (rope_scaling && rope_scaling->rope_type == "dynamic" && rope_scaling->factor > 1) {
      return static_cast<std::int64_t>(static_cast<double>(max_position_embeddings) *
                                       rope_scaling->factor);
    }
    return max_position_embeddings;
  }
};

// Unknown architectures get an error listing the supported ones; a field of
// the wrong JSON type gets an error naming the field.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text,
                                             absl::string_view file);
absl::StatusOr<ModelConfig> ModelConfigFromJson(const nlohmann::json& config,
                                                absl::string_view file);

}  // namespace placer::loader
