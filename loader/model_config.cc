#include "loader/model_config.h"

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// Reads typed fields of one JSON object; errors name the file and field.
class FieldReader {
 public:
  FieldReader(const json& object, absl::string_view file, std::string prefix = "")
      : object_(object), file_(file), prefix_(std::move(prefix)) {}

  bool Has(absl::string_view key) const {
    const auto it = object_.find(std::string(key));
    return it != object_.end() && !it->is_null();
  }

  absl::Status Int(absl::string_view key, std::int64_t& out, bool required) const {
    const auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) {
      return required ? Error(key, "is required") : absl::OkStatus();
    }
    if (!it->is_number_integer()) {
      return Error(key, absl::StrCat("must be an integer, got ", it->type_name()));
    }
    if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      return Error(key, "is too large");
    }
    out = it->get<std::int64_t>();
    return absl::OkStatus();
  }

  absl::Status Positive(absl::string_view key, std::int64_t& out, bool required) const {
    PLACER_RETURN_IF_ERROR(Int(key, out, required));
    if (Has(key) && out <= 0) return Error(key, "must be positive");
    return absl::OkStatus();
  }

  absl::Status Number(absl::string_view key, double& out) const {
    const auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_number()) {
      return Error(key, absl::StrCat("must be a number, got ", it->type_name()));
    }
    out = it->get<double>();
    return absl::OkStatus();
  }

  absl::Status Bool(absl::string_view key, bool& out) const {
    const auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_boolean()) {
      return Error(key, absl::StrCat("must be true or false, got ", it->type_name()));
    }
    out = it->get<bool>();
    return absl::OkStatus();
  }

  absl::Status String(absl::string_view key, std::string& out) const {
    const auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_string()) {
      return Error(key, absl::StrCat("must be a string, got ", it->type_name()));
    }
    out = it->get<std::string>();
    return absl::OkStatus();
  }

  absl::Status OptionalInt(absl::string_view key, std::optional<std::int64_t>& out) const {
    if (!Has(key)) return absl::OkStatus();
    std::int64_t value = 0;
    PLACER_RETURN_IF_ERROR(Int(key, value, true));
    out = value;
    return absl::OkStatus();
  }

  absl::Status OptionalNumber(absl::string_view key, std::optional<double>& out) const {
    if (!Has(key)) return absl::OkStatus();
    double value = 0;
    PLACER_RETURN_IF_ERROR(Number(key, value));
    out = value;
    return absl::OkStatus();
  }

  // eos_token_id is an int in older configs and a list in newer ones.
  absl::Status IntOrIntList(absl::string_view key, std::vector<std::int64_t>& out) const {
    const auto it = object_.find(std::string(key));
    if (it == object_.end() || it->is_null()) return absl::OkStatus();
    if (it->is_number_integer()) {
      out = {it->get<std::int64_t>()};
      return absl::OkStatus();
    }
    if (!it->is_array()) {
      return Error(key, absl::StrCat("must be an integer or a list of integers, got ",
                                     it->type_name()));
    }
    out.clear();
    for (const json& element : *it) {
      if (!element.is_number_integer()) {
        return Error(key, "must be an integer or a list of integers");
      }
      out.push_back(element.get<std::int64_t>());
    }
    return absl::OkStatus();
  }

  absl::Status Error(absl::string_view key, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ": field \"", prefix_, key, "\" ", what));
  }

 private:
  const json& object_;
  absl::string_view file_;
  std::string prefix_;
};

absl::StatusOr<const ArchitectureRow*> FindArchitecture(const json& config,
                                                        absl::string_view file) {
  std::vector<std::string> supported = SupportedArchitectures();
  const std::string supported_list = absl::StrJoin(supported, ", ");
  const auto it = config.find("architectures");
  if (it != config.end() && !it->is_null()) {
    if (!it->is_array() || it->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": field \"architectures\" must be a non-empty list of strings"));
    }
    std::vector<std::string> listed;
    for (const json& name : *it) {
      if (!name.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            file, ": field \"architectures\" must be a list of strings"));
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
  std::string model_type;
  PLACER_RETURN_IF_ERROR(FieldReader(config, file).String("model_type", model_type));
  for (const ArchitectureRow& row : kArchitectures) {
    if (row.model_type == model_type) return &row;
  }
  return absl::UnimplementedError(absl::StrCat(
      file, ": no supported architecture (\"architectures\" missing, model_type \"",
      model_type, "\"); supported: ", supported_list));
}

absl::Status ReadRopeScaling(const json& config, absl::string_view file,
                             ModelConfig& out) {
  const auto it = config.find("rope_scaling");
  if (it == config.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": field \"rope_scaling\" must be an object or null"));
  }
  FieldReader fields(*it, file, "rope_scaling.");
  RopeScaling scaling;
  // transformers renamed "type" to "rope_type"; either may appear.
  PLACER_RETURN_IF_ERROR(fields.String("type", scaling.rope_type));
  PLACER_RETURN_IF_ERROR(fields.String("rope_type", scaling.rope_type));
  PLACER_RETURN_IF_ERROR(fields.Number("factor", scaling.factor));
  PLACER_RETURN_IF_ERROR(fields.OptionalNumber("low_freq_factor", scaling.low_freq_factor));
  PLACER_RETURN_IF_ERROR(fields.OptionalNumber("high_freq_factor", scaling.high_freq_factor));
  PLACER_RETURN_IF_ERROR(fields.OptionalInt("original_max_position_embeddings",
                                            scaling.original_max_position_embeddings));
  if (scaling.rope_type.empty()) return fields.Error("rope_type", "is required");
  if (!(scaling.factor > 0)) return fields.Error("factor", "must be positive");
  if (scaling.rope_type == "llama3" &&
      (!scaling.low_freq_factor || !scaling.high_freq_factor ||
       !scaling.original_max_position_embeddings)) {
    return fields.Error("rope_type",
                        "\"llama3\" needs low_freq_factor, high_freq_factor and "
                        "original_max_position_embeddings");
  }
  out.rope_scaling = scaling;
  return absl::OkStatus();
}

absl::Status ReadLlamaFamily(const json& config, absl::string_view file,
                             ModelConfig& out) {
  FieldReader fields(config, file);
  PLACER_RETURN_IF_ERROR(fields.Positive("hidden_size", out.hidden_size, true));
  PLACER_RETURN_IF_ERROR(fields.Positive("intermediate_size", out.intermediate_size, true));
  PLACER_RETURN_IF_ERROR(fields.Positive("num_hidden_layers", out.num_hidden_layers, true));
  PLACER_RETURN_IF_ERROR(fields.Positive("num_attention_heads", out.num_attention_heads, true));
  out.num_key_value_heads = out.num_attention_heads;
  PLACER_RETURN_IF_ERROR(fields.Positive("num_key_value_heads", out.num_key_value_heads, false));
  if (out.hidden_size % out.num_attention_heads != 0 && !fields.Has("head_dim")) {
    return fields.Error("hidden_size", absl::StrCat("(", out.hidden_size,
                                                    ") is not divisible by num_attention_heads (",
                                                    out.num_attention_heads, ")"));
  }
  out.head_dim = out.hidden_size / out.num_attention_heads;
  PLACER_RETURN_IF_ERROR(fields.Positive("head_dim", out.head_dim, false));
  PLACER_RETURN_IF_ERROR(fields.Positive("vocab_size", out.vocab_size, true));
  out.max_position_embeddings = 2048;
  PLACER_RETURN_IF_ERROR(fields.Positive("max_position_embeddings",
                                         out.max_position_embeddings, false));
  out.norm_eps = 1e-6;
  PLACER_RETURN_IF_ERROR(fields.Number("rms_norm_eps", out.norm_eps));
  PLACER_RETURN_IF_ERROR(fields.Number("rope_theta", out.rope_theta));
  PLACER_RETURN_IF_ERROR(ReadRopeScaling(config, file, out));
  PLACER_RETURN_IF_ERROR(fields.OptionalInt("sliding_window", out.sliding_window));
  PLACER_RETURN_IF_ERROR(fields.Bool("use_sliding_window", out.use_sliding_window));
  PLACER_RETURN_IF_ERROR(fields.Int("max_window_layers", out.max_window_layers, false));
  if (out.architecture == Architecture::kQwen2) {
    out.qkv_bias = true;
    out.o_proj_bias = false;
  } else {
    bool attention_bias = false;
    PLACER_RETURN_IF_ERROR(fields.Bool("attention_bias", attention_bias));
    out.qkv_bias = out.o_proj_bias = attention_bias;
  }
  PLACER_RETURN_IF_ERROR(fields.Bool("mlp_bias", out.mlp_bias));
  out.tie_word_embeddings = false;
  PLACER_RETURN_IF_ERROR(fields.Bool("tie_word_embeddings", out.tie_word_embeddings));
  if (out.num_attention_heads % out.num_key_value_heads != 0) {
    return fields.Error("num_key_value_heads",
                        absl::StrCat("(", out.num_key_value_heads,
                                     ") must divide num_attention_heads (",
                                     out.num_attention_heads, ")"));
  }
  return absl::OkStatus();
}

absl::Status ReadGpt2(const json& config, absl::string_view file, ModelConfig& out) {
  FieldReader fields(config, file);
  PLACER_RETURN_IF_ERROR(fields.Positive("n_embd", out.hidden_size, true));
  PLACER_RETURN_IF_ERROR(fields.Positive("n_layer", out.num_hidden_layers, true));
  PLACER_RETURN_IF_ERROR(fields.Positive("n_head", out.num_attention_heads, true));
  PLACER_RETURN_IF_ERROR(fields.Positive("vocab_size", out.vocab_size, true));
  out.max_position_embeddings = 1024;
  PLACER_RETURN_IF_ERROR(fields.Positive("n_positions", out.max_position_embeddings, false));
  out.intermediate_size = 4 * out.hidden_size;
  PLACER_RETURN_IF_ERROR(fields.Positive("n_inner", out.intermediate_size, false));
  out.norm_eps = 1e-5;
  PLACER_RETURN_IF_ERROR(fields.Number("layer_norm_epsilon", out.norm_eps));
  if (out.hidden_size % out.num_attention_heads != 0) {
    return fields.Error("n_embd", absl::StrCat("(", out.hidden_size,
                                               ") is not divisible by n_head (",
                                               out.num_attention_heads, ")"));
  }
  out.num_key_value_heads = out.num_attention_heads;
  out.head_dim = out.hidden_size / out.num_attention_heads;
  out.qkv_bias = out.o_proj_bias = out.mlp_bias = true;
  out.tie_word_embeddings = true;
  PLACER_RETURN_IF_ERROR(fields.Bool("tie_word_embeddings", out.tie_word_embeddings));
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
  FieldReader fields(config, file);
  PLACER_RETURN_IF_ERROR(fields.String("model_type", out.model_type));
  if (out.is_gpt2()) {
    PLACER_RETURN_IF_ERROR(ReadGpt2(config, file, out));
  } else {
    PLACER_RETURN_IF_ERROR(ReadLlamaFamily(config, file, out));
  }
  // Bounds the tensor list derived from the config (and the work to build it).
  constexpr std::int64_t kMaxLayers = 10000;
  if (out.num_hidden_layers > kMaxLayers) {
    return fields.Error(out.is_gpt2() ? "n_layer" : "num_hidden_layers",
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
      return fields.Error(name, absl::StrCat("(", value, ") is implausibly large (limit ",
                                             kMaxDimension, ")"));
    }
  }
  PLACER_RETURN_IF_ERROR(fields.String("torch_dtype", out.torch_dtype));
  PLACER_RETURN_IF_ERROR(fields.OptionalInt("bos_token_id", out.bos_token_id));
  PLACER_RETURN_IF_ERROR(fields.IntOrIntList("eos_token_id", out.eos_token_ids));
  PLACER_RETURN_IF_ERROR(fields.OptionalInt("pad_token_id", out.pad_token_id));
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
