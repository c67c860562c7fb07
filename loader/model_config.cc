#include "loader/model_config.h"

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

using nlohmann::json;

struct ArchitectureRow {
  Architecture architecture;
  absl::string_view name;
  absl::string_view model_type;
};

constexpr std::array<ArchitectureRow, 4> kArchitectures = {{
    {Architecture::kLlama, "LlamaForCausalLM", "llama"},
    {Architecture::kMistral, "MistralForCausalLM", "mistral"},
    {Architecture::kQwen2, "Qwen2ForCausalLM", "qwen2"},
    {Architecture::kGpt2, "GPT2LMHeadModel", "gpt2"},
}};

absl::Status FieldError(absl::string_view file, absl::string_view field,
                        absl::string_view why) {
  return JsonError({file, field}, why);
}

// A positive integer; absent or null takes `fallback` (none: required).
absl::StatusOr<std::int64_t> ReadPositiveField(const json& object, JsonWhere where,
                                               absl::string_view key,
                                               std::optional<std::int64_t> fallback) {
  PLACER_ASSIGN_OR_RETURN(const std::int64_t value, ReadIntField(object, where, key, fallback));
  if (value <= 0) {
    const std::string path = JoinJsonPath(where.path, key);
    return JsonError({where.file, path}, absl::StrCat("must be positive, got ", value));
  }
  return value;
}

// eos_token_id is an int in older configs and a list in newer ones.
absl::StatusOr<std::vector<std::int64_t>> ReadIntOrIntListField(const json& object,
                                                                JsonWhere where,
                                                                absl::string_view key) {
  PLACER_ASSIGN_OR_RETURN(const json* value, FindJsonField(object, where, key));
  std::vector<std::int64_t> out;
  if (value == nullptr) return out;
  const std::string path = JoinJsonPath(where.path, key);
  if (!value->is_array()) {
    PLACER_ASSIGN_OR_RETURN(const std::int64_t id, JsonAsInt(*value, {where.file, path}));
    return std::vector<std::int64_t>{id};
  }
  for (std::size_t i = 0; i < value->size(); ++i) {
    const std::string element = IndexJsonPath(path, i);
    PLACER_ASSIGN_OR_RETURN(const std::int64_t id, JsonAsInt((*value)[i], {where.file, element}));
    out.push_back(id);
  }
  return out;
}

absl::StatusOr<const ArchitectureRow*> FindArchitecture(const json& config,
                                                        absl::string_view file) {
  std::vector<std::string> supported = SupportedArchitectures();
  const std::string supported_list = absl::StrJoin(supported, ", ");
  const auto it = config.find("architectures");
  if (it != config.end() && !it->is_null()) {
    if (!it->is_array() || it->empty()) {
      return FieldError(file, "architectures", "must be a non-empty list of strings");
    }
    std::vector<std::string> listed;
    for (const json& name : *it) {
      if (!name.is_string()) {
        return FieldError(file, "architectures", "must be a list of strings");
      }
      listed.push_back(name.get<std::string>());
      for (const ArchitectureRow& row : kArchitectures) {
        if (row.name == listed.back()) return &row;
      }
    }
    return absl::UnimplementedError(absl::StrCat(
        file, ": unsupported architecture ", absl::StrJoin(listed, ", "),
        "; supported: ", supported_list));
  }
  // Some configs omit "architectures"; model_type is then decisive.
  PLACER_ASSIGN_OR_RETURN(const std::string model_type,
                          ReadStringField(config, {file, ""}, "model_type", ""));
  for (const ArchitectureRow& row : kArchitectures) {
    if (row.model_type == model_type) return &row;
  }
  return absl::UnimplementedError(absl::StrCat(
      file, ": no supported architecture (\"architectures\" missing, model_type \"",
      model_type, "\"); supported: ", supported_list));
}

absl::Status ReadRopeScaling(const json& config, absl::string_view file,
                             ModelConfig& out) {
  PLACER_ASSIGN_OR_RETURN(const json* found, FindJsonField(config, {file, ""}, "rope_scaling"));
  if (found == nullptr) return absl::OkStatus();
  const JsonWhere where{file, "rope_scaling"};
  RopeScaling scaling;
  // transformers renamed "type" to "rope_type"; either may appear.
  PLACER_ASSIGN_OR_RETURN(scaling.rope_type, ReadStringField(*found, where, "type", ""));
  PLACER_ASSIGN_OR_RETURN(scaling.rope_type,
                          ReadStringField(*found, where, "rope_type", scaling.rope_type));
  PLACER_ASSIGN_OR_RETURN(scaling.factor, ReadNumberField(*found, where, "factor", 1.0));
  PLACER_ASSIGN_OR_RETURN(scaling.low_freq_factor,
                          ReadOptionalNumberField(*found, where, "low_freq_factor"));
  PLACER_ASSIGN_OR_RETURN(scaling.high_freq_factor,
                          ReadOptionalNumberField(*found, where, "high_freq_factor"));
  PLACER_ASSIGN_OR_RETURN(scaling.original_max_position_embeddings,
                          ReadOptionalIntField(*found, where, "original_max_position_embeddings"));
  if (scaling.rope_type.empty()) return FieldError(file, "rope_scaling.rope_type", "is required");
  if (!(scaling.factor > 0)) return FieldError(file, "rope_scaling.factor", "must be positive");
  if (scaling.rope_type == "llama3" &&
      (!scaling.low_freq_factor || !scaling.high_freq_factor ||
       !scaling.original_max_position_embeddings)) {
    return FieldError(file, "rope_scaling.rope_type",
                      "\"llama3\" needs low_freq_factor, high_freq_factor and "
                      "original_max_position_embeddings");
  }
  out.rope_scaling = scaling;
  return absl::OkStatus();
}

absl::Status ReadLlamaFamily(const json& config, absl::string_view file,
                             ModelConfig& out) {
  const JsonWhere top{file, ""};
  PLACER_ASSIGN_OR_RETURN(out.hidden_size, ReadPositiveField(config, top, "hidden_size", {}));
  PLACER_ASSIGN_OR_RETURN(out.intermediate_size,
                          ReadPositiveField(config, top, "intermediate_size", {}));
  PLACER_ASSIGN_OR_RETURN(out.num_hidden_layers,
                          ReadPositiveField(config, top, "num_hidden_layers", {}));
  PLACER_ASSIGN_OR_RETURN(out.num_attention_heads,
                          ReadPositiveField(config, top, "num_attention_heads", {}));
  PLACER_ASSIGN_OR_RETURN(out.num_key_value_heads,
                          ReadPositiveField(config, top, "num_key_value_heads",
                                            out.num_attention_heads));
  PLACER_ASSIGN_OR_RETURN(const std::optional<std::int64_t> head_dim,
                          ReadOptionalIntField(config, top, "head_dim"));
  if (out.hidden_size % out.num_attention_heads != 0 && !head_dim) {
    return FieldError(file, "hidden_size",
                      absl::StrCat("(", out.hidden_size, ") is not divisible by "
                                   "num_attention_heads (", out.num_attention_heads, ")"));
  }
  PLACER_ASSIGN_OR_RETURN(out.head_dim,
                          ReadPositiveField(config, top, "head_dim",
                                            out.hidden_size / out.num_attention_heads));
  PLACER_ASSIGN_OR_RETURN(out.vocab_size, ReadPositiveField(config, top, "vocab_size", {}));
  PLACER_ASSIGN_OR_RETURN(out.max_position_embeddings,
                          ReadPositiveField(config, top, "max_position_embeddings", 2048));
  PLACER_ASSIGN_OR_RETURN(out.norm_eps, ReadNumberField(config, top, "rms_norm_eps", 1e-6));
  PLACER_ASSIGN_OR_RETURN(out.rope_theta,
                          ReadNumberField(config, top, "rope_theta", out.rope_theta));
  PLACER_RETURN_IF_ERROR(ReadRopeScaling(config, file, out));
  PLACER_ASSIGN_OR_RETURN(out.sliding_window,
                          ReadOptionalIntField(config, top, "sliding_window"));
  PLACER_ASSIGN_OR_RETURN(out.use_sliding_window,
                          ReadBoolField(config, top, "use_sliding_window",
                                        out.use_sliding_window));
  PLACER_ASSIGN_OR_RETURN(out.max_window_layers,
                          ReadIntField(config, top, "max_window_layers", out.max_window_layers));
  if (out.architecture == Architecture::kQwen2) {
    out.qkv_bias = true;
    out.o_proj_bias = false;
  } else {
    PLACER_ASSIGN_OR_RETURN(const bool attention_bias,
                            ReadBoolField(config, top, "attention_bias", false));
    out.qkv_bias = out.o_proj_bias = attention_bias;
  }
  PLACER_ASSIGN_OR_RETURN(out.mlp_bias, ReadBoolField(config, top, "mlp_bias", out.mlp_bias));
  PLACER_ASSIGN_OR_RETURN(out.tie_word_embeddings,
                          ReadBoolField(config, top, "tie_word_embeddings", false));
  if (out.num_attention_heads % out.num_key_value_heads != 0) {
    return FieldError(file, "num_key_value_heads",
                      absl::StrCat("(", out.num_key_value_heads,
                                   ") must divide num_attention_heads (",
                                   out.num_attention_heads, ")"));
  }
  return absl::OkStatus();
}

absl::Status ReadGpt2(const json& config, absl::string_view file, ModelConfig& out) {
  const JsonWhere top{file, ""};
  PLACER_ASSIGN_OR_RETURN(out.hidden_size, ReadPositiveField(config, top, "n_embd", {}));
  PLACER_ASSIGN_OR_RETURN(out.num_hidden_layers, ReadPositiveField(config, top, "n_layer", {}));
  PLACER_ASSIGN_OR_RETURN(out.num_attention_heads,
                          ReadPositiveField(config, top, "n_head", {}));
  PLACER_ASSIGN_OR_RETURN(out.vocab_size, ReadPositiveField(config, top, "vocab_size", {}));
  PLACER_ASSIGN_OR_RETURN(out.max_position_embeddings,
                          ReadPositiveField(config, top, "n_positions", 1024));
  PLACER_ASSIGN_OR_RETURN(out.intermediate_size,
                          ReadPositiveField(config, top, "n_inner", 4 * out.hidden_size));
  PLACER_ASSIGN_OR_RETURN(out.norm_eps,
                          ReadNumberField(config, top, "layer_norm_epsilon", 1e-5));
  if (out.hidden_size % out.num_attention_heads != 0) {
    return FieldError(file, "n_embd",
                      absl::StrCat("(", out.hidden_size, ") is not divisible by n_head (",
                                   out.num_attention_heads, ")"));
  }
  out.num_key_value_heads = out.num_attention_heads;
  out.head_dim = out.hidden_size / out.num_attention_heads;
  out.qkv_bias = out.o_proj_bias = out.mlp_bias = true;
  PLACER_ASSIGN_OR_RETURN(out.tie_word_embeddings,
                          ReadBoolField(config, top, "tie_word_embeddings", true));
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> SupportedArchitectures() {
  std::vector<std::string> names;
  for (const ArchitectureRow& row : kArchitectures) names.emplace_back(row.name);
  return names;
}

absl::string_view ArchitectureName(Architecture architecture) {
  for (const ArchitectureRow& row : kArchitectures) {
    if (row.architecture == architecture) return row.name;
  }
  return "unknown";
}

absl::StatusOr<ModelConfig> ModelConfigFromJson(const json& config,
                                                absl::string_view file) {
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": must be a JSON object, got ", config.type_name()));
  }
  PLACER_ASSIGN_OR_RETURN(const ArchitectureRow* row, FindArchitecture(config, file));
  ModelConfig out;
  out.architecture = row->architecture;
  out.model_type = std::string(row->model_type);
  out.raw = config;
  const JsonWhere top{file, ""};
  PLACER_ASSIGN_OR_RETURN(out.model_type,
                          ReadStringField(config, top, "model_type", out.model_type));
  if (out.is_gpt2()) {
    PLACER_RETURN_IF_ERROR(ReadGpt2(config, file, out));
  } else {
    PLACER_RETURN_IF_ERROR(ReadLlamaFamily(config, file, out));
  }
  // Bounds the tensor list derived from the config (and the work to build it).
  constexpr std::int64_t kMaxLayers = 10000;
  if (out.num_hidden_layers > kMaxLayers) {
    return FieldError(file, out.is_gpt2() ? "n_layer" : "num_hidden_layers",
                      absl::StrCat("(", out.num_hidden_layers,
                                     ") is implausibly large (limit ", kMaxLayers, ")"));
  }
  // Keeps shape arithmetic (3 * hidden, heads * head_dim) far from overflow.
  constexpr std::int64_t kMaxDimension = std::int64_t{1} << 30;
  for (const auto& [name, value] :
       {std::pair<const char*, std::int64_t>{"hidden_size", out.hidden_size},
        {"intermediate_size", out.intermediate_size},
        {"num_attention_heads", out.num_attention_heads},
        {"num_key_value_heads", out.num_key_value_heads},
        {"head_dim", out.head_dim},
        {"vocab_size", out.vocab_size},
        {"max_position_embeddings", out.max_position_embeddings}}) {
    if (value > kMaxDimension) {
      return FieldError(file, name, absl::StrCat("(", value, ") is implausibly large (limit ",
                                                 kMaxDimension, ")"));
    }
  }
  PLACER_ASSIGN_OR_RETURN(out.torch_dtype, ReadStringField(config, top, "torch_dtype", ""));
  PLACER_ASSIGN_OR_RETURN(out.bos_token_id, ReadOptionalIntField(config, top, "bos_token_id"));
  PLACER_ASSIGN_OR_RETURN(out.eos_token_ids, ReadIntOrIntListField(config, top, "eos_token_id"));
  PLACER_ASSIGN_OR_RETURN(out.pad_token_id, ReadOptionalIntField(config, top, "pad_token_id"));
  PLACER_ASSIGN_OR_RETURN(const json* quantization,
                          FindJsonField(config, top, "quantization_config"));
  if (quantization != nullptr) {
    PLACER_ASSIGN_OR_RETURN(out.quantization,
                            ParsePrequantizedFormat(*quantization, file, "quantization_config"));
  }
  return out;
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text,
                                             absl::string_view file) {
  json parsed;
  try {
    parsed = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": not valid JSON: ", e.what()));
  }
  return ModelConfigFromJson(parsed, file);
}

}  // namespace placer::loader
